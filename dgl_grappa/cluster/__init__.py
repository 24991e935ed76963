"""Processes, hosts and networks: everything that starts, places, isolates or stops a process.

Nothing here knows about graphs or models. Layer 1 (above :mod:`dgl_grappa.config`).

* :mod:`.launch` - spawned local workers, gloo process groups, devices, threads;
* :mod:`.basics` - what a launcher needs without torch (log format, a free port, threads per worker);
* :mod:`.procs` - running a command bounded in its namespaces, killed as a tree at the end;
* :mod:`.ptree` - killing processes by PID: trees, sessions, a job's tagged processes
  (import-free, the one implementation every launcher, the guard and the test hosts call);
* :mod:`.guard` - the remote end of every launched command (import-free: ``python -m
  dgl_grappa.cluster.guard``);
* :mod:`.hosts` - ip_config files, Slurm node lists, a worker's identity from its environment;
* :mod:`.remote` - commands on other hosts, the same whichever way they are reached;
* :mod:`.access` - how hosts are reached (:class:`~.access.HostAccess`): ssh, or the test hosts,
  chosen by ``launch.remote``;
* :mod:`.netns` - private network namespaces, loopback shaping (``tc``);
* :mod:`.testhosts` - the test-host harness, a package of its own: several emulated hosts on one
  machine, with their links, CPU shares and time dilation, byte counters and teardown
  (``python -m dgl_grappa.cluster.testhosts``); loaded for ``launch.remote: netns`` only;
* :mod:`.membership` - the generations of a job's process group when machines are lost (one per change,
  written by the launcher; the rendezvous a member follows to the newest; fencing a replaced worker);
* :mod:`.liveness` - liveness over the hosts' network: each worker's reporter, and the launcher's
  judgement (unreachable host, stalled worker, partition);
* :mod:`.faults` - fault injection for recovery tests;
* :mod:`.testing` - helpers for multi-process tests.

Kept free of imports at package level, so the guard starts in a fraction of a second.
"""
