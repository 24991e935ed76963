"""Grappa's own runtime: spawned (or torchrun/Slurm/ssh-started) workers, each training on its part.

* :mod:`.run` - ``python -m dgl_grappa train`` on one machine: partitions, workers, restarts;
* :mod:`.worker` - one worker of a job started elsewhere (torchrun, srun, the host launcher);
* :mod:`.trainer` - the training loop of one worker (:class:`~.trainer.Trainer`);
* :mod:`.floor` - the floor of an epoch (``run.floor``), measured after each one;
* :mod:`.summary` - summary.json: every worker's figures, written by rank 0.

Layer 6, side by side with :mod:`dgl_grappa.distdgl`: neither imports the other.
"""
