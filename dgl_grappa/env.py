"""Every environment variable dgl_grappa reads or sets, in one place (import-free).

Users set the first five (and ``DGL_GRAPPA_VENV``); the launchers set the others for the processes they start (a
user sets them only to reproduce what a launcher does).

============================  ====================================================================
``DGL_GRAPPA_DATA``           the default of ``data.root``: where the datasets loaded by name (Cora,
                              CiteSeer, the OGB graphs) are read from and downloaded to (default:
                              the cache folder below)
``DGL_GRAPPA_CACHE``          writable cache folder: DGL's processed copies of the Planetoid files,
                              and the default data folder (default ``$XDG_CACHE_HOME/dgl_grappa``,
                              else ``~/.cache/dgl_grappa``)
``DGL_GRAPPA_PLANETOID``      a folder that already holds the Planetoid files, read when ``data.root``
                              has none of them (no download then)
``DGL_GRAPPA_PLANETOID_URL``  where those files are downloaded from when no local copy has them (default:
                              the Planetoid authors' repository on GitHub, the URLs PyG uses)
``DGL_GRAPPA_OGB_URL``        where the OGB archives (``arxiv.zip``, ...) are downloaded from (default:
                              OGB's own server, the URLs the ``ogb`` package uses)
``DGL_GRAPPA_JOB``            the tag every process of one job carries; the guard's last resort
                              kills by it (``python -m dgl_grappa.cluster.guard --kill-job``)
``DGL_GRAPPA_NETNS``          ``1`` inside the private network namespace a job was re-run in
``DGL_GRAPPA_WIRE``           ``nic``: count the host's interface bytes, not the loopback's (jobs
                              across hosts)
``DGL_GRAPPA_MACHINE_ID``     a DistDGL trainer's machine id when several "machines" share one
                              host (applied by ``import dgl_grappa.distdgl``)
``DGL_GRAPPA_EPOCHS``         the folder where a DistDGL script's trainers record each pass over their
                              loaders (set by the launcher; :mod:`dgl_grappa.distdgl.loader_meter`)
``DGL_GRAPPA_FAULT``          a JSON fault-injection point, for recovery tests
                              (:mod:`dgl_grappa.cluster.faults`)
``DGL_GRAPPA_JOIN``           the generation a worker joins when it takes a lost worker's part over
                              (``launch.on_failure: continue``, :mod:`dgl_grappa.cluster.membership`)
``DGL_GRAPPA_BEAT``           seconds between a worker's liveness reports (its probes of its peers over
                              the network, :mod:`dgl_grappa.cluster.liveness`), written to the run's
                              output folder for the multi-host launcher (which sets it)
``DGL_GRAPPA_HOST_ADDR``      the address of a worker's host as its peers reach it (set by the
                              multi-host launcher; the worker's liveness listener binds it)
``DGL_GRAPPA_VENV``           where ``scripts/_bootstrap.sh`` keeps the virtual environment
============================  ====================================================================
"""

ENV_PLANETOID = "DGL_GRAPPA_PLANETOID"
ENV_CACHE = "DGL_GRAPPA_CACHE"
ENV_PLANETOID_URL = "DGL_GRAPPA_PLANETOID_URL"
ENV_DATA = "DGL_GRAPPA_DATA"
ENV_OGB_URL = "DGL_GRAPPA_OGB_URL"
ENV_JOB = "DGL_GRAPPA_JOB"
ENV_NETNS = "DGL_GRAPPA_NETNS"
ENV_WIRE = "DGL_GRAPPA_WIRE"
ENV_MACHINE_ID = "DGL_GRAPPA_MACHINE_ID"
ENV_FAULT = "DGL_GRAPPA_FAULT"
ENV_EPOCHS = "DGL_GRAPPA_EPOCHS"
ENV_JOIN = "DGL_GRAPPA_JOIN"
ENV_BEAT = "DGL_GRAPPA_BEAT"
ENV_HOST_ADDR = "DGL_GRAPPA_HOST_ADDR"
ENV_VENV = "DGL_GRAPPA_VENV"
