"""The trainer program that tests/dglscript.py gives the package's DistDGL launcher: it runs a script with its own
argument list, as DGL's ``tools/launch.py`` would, and meters the bytes of each pass over a loader.

The launcher appends its own arguments (``--config``, ``--start_epoch``, ``--stop_epoch``, ``--ip_config``,
``--part_config``, ``--out_dir``); this program keeps ``--ip_config``/``--part_config``/``--out_dir`` to fill
the ``{ip_config}``/``{part_config}``/``{out_dir}`` of ``--script-args`` and gives the script exactly those
arguments. Before the script it applies the package's machine-id override (several DistDGL machines on one
host) and installs :class:`dgl_grappa.distdgl.TrafficCounter`; every complete pass over a DGL distributed
loader or a drop-in loader then prints one line, ``loader traffic <class> <json counts>``, which the tests read
from the trainer's log.
"""
import argparse
import json
import runpy
import shlex
import sys
from pathlib import Path

import dgl_grappa.distdgl.machine_id  # noqa: F401  (first: DGL's machine id of each trainer on one host)


def _meter(cls, counter) -> None:
    """Print the counts of every complete pass over ``cls``'s iterator."""
    inner = cls.__iter__

    def metered(self):
        counter.take()  # what came before this pass is not its
        it = inner(self)  # DGL's loaders return themselves: `yield from` would call this again
        while True:
            try:
                item = next(it)
            except StopIteration:
                break
            yield item
        print(f"loader traffic {cls.__name__} {json.dumps(counter.take())}", flush=True)

    cls.__iter__ = metered


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--script", required=True)
    ap.add_argument("--script-args", default="")
    ap.add_argument("--ip_config", required=True)
    ap.add_argument("--part_config", required=True)
    ap.add_argument("--out_dir", required=True)
    a, _ = ap.parse_known_args()  # the rest is the launcher's, not the script's
    values = {"ip_config": a.ip_config, "part_config": a.part_config, "out_dir": a.out_dir}
    argv = [tok.format(**values) for tok in shlex.split(a.script_args)]

    import dgl
    from dgl_grappa.distdgl import TrafficCounter
    from dgl_grappa.method.dropin import GrappaEdgeLoader, GrappaHeteroLoader, GrappaLoader

    counter = TrafficCounter.install()
    for cls in (dgl.dataloading.DistNodeDataLoader, dgl.dataloading.DistEdgeDataLoader, GrappaLoader,
                GrappaEdgeLoader, GrappaHeteroLoader):
        _meter(cls, counter)
    script = Path(a.script).resolve()
    sys.argv = [str(script)] + argv
    sys.path.insert(0, str(script.parent))  # as `python script.py` has it: its siblings import
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
