"""The machine-id override: every DistDGL trainer on one host gets its machine id from the environment.

Importing this module (``import dgl_grappa.distdgl`` does) applies the override when
``DGL_GRAPPA_MACHINE_ID`` is set; a trainer script must import it before
``dgl.distributed.initialize`` (DGL's sampler processes are spawned and re-import the script,
so the override must sit at import time).
"""
import os

from ..env import ENV_MACHINE_ID


def _override_machine_id() -> None:
    mid = os.environ.get(ENV_MACHINE_ID)
    if mid is None:
        return
    # DGL finds "its" machine as the first ip_config line with a local IP; on one host all
    # lines are 127.0.0.1, so every trainer would be machine 0 and pull from the wrong server.
    import dgl.distributed.rpc_client as _rc

    _rc.get_local_machine_id = lambda server_namebook, _m=int(mid): _m


_override_machine_id()
