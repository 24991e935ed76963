"""Every bad input of docs/errors.md, in one parametrised test, against the table's exact message.

Each case is a row of docs/errors.md (id, what is wrong, exit status, the message). The
test runs the real command line (in this process, so that most cases cost no interpreter
start; the disk-full case in a private mount namespace), and checks:

* the exit status of the row;
* for an error (status != 0): exactly one line on stderr starts with ``dgl_grappa: error:``,
  it is the last line, its text is the row's message (``{...}`` in the table stands for a
  value that varies, such as the case's folder or a port), and there is no traceback;
  nothing in the case's folder was written or changed;
* for a case that is handled (status 0): the row's message is a log line of the run.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dgl_grappa.cli import main

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "errors.md"

TINY = [
    "--data.synthetic.num_nodes=300",
    "--data.synthetic.num_communities=16",
    "--partition.num_parts=2",
    "--train.epochs=2",
    "--train.batch_size=100",
    "--model.hidden=8",
    "--train.fanouts=[3,3]",
    "--train.eval_every=0",
    "--run.progress=false",
    "--run.timeout_s=240",
]


def documented() -> dict[str, tuple[int, str]]:
    """id -> (exit status, message) from the table in docs/errors.md."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        m = re.match(r"\|\s*`([a-z0-9-]+)`\s*\|.*\|\s*(\d+)\s*\|\s*`(.+)`\s*\|\s*$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), m.group(3))
    return rows


def message_regex(doc: str) -> re.Pattern:
    """The documented message as a pattern: ``{...}`` matches any text, the rest verbatim."""
    parts = re.split(r"(\{[^{}]+\})", doc)
    return re.compile("".join(".+?" if re.fullmatch(r"\{[^{}]+\}", p) else re.escape(p) for p in parts))


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# ---------------------------------------------------------------------------------------
# Set-ups: each returns the command line of its case (run in tmp, which holds its inputs)
# ---------------------------------------------------------------------------------------


def _user_graph(path: Path, feat_key: str = "feat", seedless_half: bool = False) -> Path:
    """A small user graph: two disconnected random halves (METIS cuts between them)."""
    import dgl

    g0 = torch.Generator().manual_seed(0)
    n, half = 200, 100
    src = torch.randint(0, half, (800,), generator=g0)
    dst = torch.randint(0, half, (800,), generator=g0)
    src, dst = torch.cat([src, src + half]), torch.cat([dst, dst + half])
    g = dgl.to_bidirected(dgl.graph((src, dst), num_nodes=n))
    g.ndata[feat_key] = torch.randn(n, 8, generator=g0)
    g.ndata["label"] = torch.randint(0, 3, (n,), generator=g0)
    train = torch.zeros(n, dtype=torch.bool)
    train[: half if seedless_half else n : 2] = True
    g.ndata["train_mask"] = train
    g.ndata["val_mask"] = ~train & (torch.arange(n) % 4 == 1)
    g.ndata["test_mask"] = ~train & (torch.arange(n) % 4 == 3)
    dgl.save_graphs(str(path), [g])
    return path


def _fake_checkpoint(folder: Path, overrides: list[str], epoch: int = 1) -> Path:
    """A real checkpoint file (the store's format) written for the config of ``overrides``."""
    from dgl_grappa.config import load_config
    from dgl_grappa.runtime.checkpoint import CheckpointStore, fingerprint

    cfg = load_config(None, overrides)
    return CheckpointStore(folder).save({"model": {"w": torch.zeros(2)}, "optimizer": {}}, epoch, fingerprint(cfg))


def setup_yaml_malformed(tmp):
    (tmp / "bad.yaml").write_text("train:\n  epochs: [\n")
    return ["train", "--config", str(tmp / "bad.yaml")]


def setup_unknown_key(tmp):
    return ["train", "--train.epochz=3"]


def setup_wrong_type(tmp):
    return ["train", "--train.epochs=three"]


def setup_kernels_unknown(tmp):
    return ["train", "--train.kernels=cudnn"]


def setup_missing_config(tmp):
    return ["train", "--config", str(tmp / "nope.yaml")]


def setup_fanouts_vs_layers(tmp):
    return ["train", "--model.num_layers=3"]


def setup_num_parts_zero(tmp):
    return ["train", "--partition.num_parts=0"]


def setup_planetoid_offline(tmp):
    # data.root has no files and the download meets a closed port (conftest points the URL at one)
    return ["train", "--data.name=cora", f"--data.root={tmp / 'planetoid'}"]


def setup_planetoid_incomplete(tmp):
    (tmp / "planetoid").mkdir()
    (tmp / "planetoid" / "ind.cora.x").write_bytes(b"x")
    return ["train", "--data.name=cora", f"--data.root={tmp / 'planetoid'}"]


def setup_ogb_offline(tmp):
    # the download meets a closed port (conftest points the URL at one)
    return ["train", "--data.name=ogbn-arxiv", f"--data.root={tmp / 'data'}"]


def setup_data_name_unknown(tmp):
    return ["train", "--data.name=ogbn-proteins"]


def setup_user_graph_missing(tmp):
    return ["train", "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_user_graph_unreadable(tmp):
    (tmp / "graph.bin").write_bytes(b"not a graph")
    return ["train", "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_ndata_key_wrong(tmp):
    _user_graph(tmp / "graph.bin", feat_key="x")
    return ["train", "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_negative_lr(tmp):
    return ["train", "--train.lr=-1"]


def setup_bad_bandwidth(tmp):
    return ["train", "--network.bandwidth=fast"]


def setup_override_without_value(tmp):
    return ["train", "--train.epochs"]


def setup_gat_heads_zero(tmp):
    return ["train", "--model.name=gat", "--model.heads=0"]


def setup_featureless_without_embed(tmp):
    return ["train", "--data.synthetic.featureless=true"]


HETERO = ["--data.name=hetsynth", "--model.name=rgcn", "--model.embed=true"]


def setup_hetero_unknown_etype(tmp):
    return ["train", *HETERO, "--data.etypes=[cites,likes]"]


def setup_hetero_unknown_ntype(tmp):
    return ["train", *HETERO, "--data.target=venue"]


def setup_hetero_target_without_labels(tmp):
    return ["train", *HETERO, "--data.target=author"]


def setup_hetero_featureless_without_embed(tmp):
    return ["compare", "--data.name=hetsynth", "--model.name=rgcn"]


def setup_hetero_wrong_model(tmp):
    return ["train", "--data.name=hetsynth", "--model.embed=true"]


def setup_hetero_halo_sync_negative(tmp):
    return ["train", *HETERO, "--model.embed_halo_sync=-1"]


def setup_link_fractions(tmp):
    return ["train", "--train.task=link", "--link.val_frac=0.5", "--link.test_frac=0.5"]


def setup_link_correction(tmp):
    return ["train", "--train.task=link", "--grappa.correction=batch"]


def setup_link_no_edges(tmp):
    import dgl

    n = 50
    g = dgl.graph((torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)), num_nodes=n)
    g.ndata["feat"] = torch.randn(n, 4)
    g.ndata["label"] = torch.arange(n) % 3
    g.ndata["train_mask"] = torch.arange(n) % 2 == 0
    g.ndata["val_mask"] = torch.arange(n) % 4 == 1
    g.ndata["test_mask"] = torch.arange(n) % 4 == 3
    dgl.save_graphs(str(tmp / "graph.bin"), [g])
    return ["train", *TINY, "--train.task=link", "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_num_parts_over_nodes(tmp):
    return ["train", "--data.synthetic.num_nodes=50", "--data.synthetic.num_communities=16", "--partition.num_parts=64"]


def setup_num_parts_empty_part(tmp):
    return [
        "partition",
        "--data.synthetic.num_nodes=50",
        "--data.synthetic.num_communities=16",
        "--partition.num_parts=40",
    ]


def setup_output_dir_uncreatable(tmp):
    return ["train", "--run.output_dir=/proc/nope"]


def setup_output_dir_in_use(tmp):
    from dgl_grappa.runtime.folders import FolderLock

    # held through another open file description: flock refuses it as it would another process
    setup_output_dir_in_use.lock = FolderLock(tmp / "run", "run.output_dir").acquire()
    return ["train", *TINY, f"--run.output_dir={tmp / 'run'}"]


def setup_peer_timeout_zero(tmp):
    return ["train", "--run.peer_timeout_s=0"]


def setup_continue_on_one_machine(tmp):
    return ["train", "--launch.on_failure=continue"]


def setup_spare_hosts_without_continue(tmp):
    return ["train", "--launch.remote=netns", "--launch.spare_hosts=1"]


def setup_continue_with_repartitioning(tmp):
    return ["train", "--launch.on_failure=continue", "--launch.remote=netns", "--schedule.k=2"]


def setup_checkpoint_dir_uncreatable(tmp):
    (tmp / "file").write_text("")
    return ["train", f"--checkpoint.dir={tmp / 'file' / 'ck'}"]


def setup_truncated_part_file(tmp):
    args = ["partition", *TINY, f"--run.output_dir={tmp / 'run'}"]
    assert main(args) == 0
    f = tmp / "run" / "partitions" / "0" / "part1" / "graph.dgl"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return args


def setup_prepare_truncated_features(tmp):
    assert main(["partition", *TINY, f"--partition.out_dir={tmp / 'parts'}"]) == 0
    f = tmp / "parts" / "part1" / "node_feat.dgl"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # DGL's reader would return zeros for the rest
    return ["prepare", "--part-config", str(tmp / "parts"), "--force"]


def setup_features_not_finite(tmp):
    _user_graph(tmp / "graph.bin")
    import dgl

    g = dgl.load_graphs(str(tmp / "graph.bin"))[0][0]
    g.ndata["feat"][3, 0], g.ndata["feat"][3, 1], g.ndata["feat"][7, 2] = float("inf"), float("nan"), -float("inf")
    dgl.save_graphs(str(tmp / "graph.bin"), [g])
    return ["train", *TINY, "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_loss_not_finite(tmp):
    # an absurd learning rate: the first update blows the weights up, the next epoch's loss is not a number; no
    # checkpoint was written by then, so the new output folder goes (its lock, its partitions)
    return [
        "train",
        *TINY,
        "--train.lr=1e30",
        "--train.epochs=4",
        "--checkpoint.every=10",
        f"--run.output_dir={tmp / 'run'}",
    ]


def _edit_user_graph(tmp, edit) -> list[str]:
    """``_user_graph`` changed by ``edit(g)``, and the train command on it."""
    import dgl

    _user_graph(tmp / "graph.bin")
    g = dgl.load_graphs(str(tmp / "graph.bin"))[0][0]
    edit(g)
    dgl.save_graphs(str(tmp / "graph.bin"), [g])
    return ["train", *TINY, "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}", f"--run.output_dir={tmp / 'run'}"]


def setup_label_beyond_classes(tmp):
    def edit(g):
        g.ndata["label"][17] = 1 << 40

    return _edit_user_graph(tmp, edit)


def setup_features_one_dimensional(tmp):
    def edit(g):
        g.ndata["feat"] = g.ndata["feat"][:, 0].contiguous()

    return _edit_user_graph(tmp, edit)


def setup_features_huge(tmp):
    def edit(g):
        g.ndata["feat"][5] *= 1e20

    return [*_edit_user_graph(tmp, edit), "--train.epochs=1"]  # the warning comes before any work: one epoch


def setup_prebuilt_part_missing(tmp):
    assert main(["partition", *TINY, f"--partition.out_dir={tmp / 'parts'}"]) == 0
    (tmp / "parts" / "part1" / "node_feat.dgl").unlink()
    return ["train", *TINY, f"--partition.prebuilt={tmp / 'parts'}"]


def setup_prebuilt_other_graph(tmp):
    assert main(["partition", *TINY, f"--partition.out_dir={tmp / 'parts'}"]) == 0
    _user_graph(tmp / "graph.bin")
    return [
        "train",
        *TINY,
        "--data.name=dgl",
        f"--data.path={tmp / 'graph.bin'}",
        f"--partition.prebuilt={tmp / 'parts'}",
    ]


def setup_yaml_duplicate_key(tmp):
    (tmp / "dup.yaml").write_text("train:\n  epochs: 2\nmodel:\n  hidden: 8\ntrain:\n  lr: 0.01\n")
    return ["train", "--config", str(tmp / "dup.yaml")]


def setup_name_is_a_path(tmp):
    return ["train", "--name=../../../x"]


def setup_partition_folder_read_only(tmp):
    return ["train", *TINY, f"--partition.out_dir={tmp / 'ck' / 'parts'}", f"--run.output_dir={tmp / 'run'}"]


def setup_graph_without_edges(tmp):
    import dgl

    n = 50
    g = dgl.graph((torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)), num_nodes=n)
    g.ndata["feat"] = torch.randn(n, 4)
    g.ndata["label"] = torch.arange(n) % 3
    g.ndata["train_mask"] = torch.arange(n) % 2 == 0
    g.ndata["val_mask"] = torch.arange(n) % 4 == 1
    g.ndata["test_mask"] = torch.arange(n) % 4 == 3
    dgl.save_graphs(str(tmp / "graph.bin"), [g])
    return ["train", *TINY, "--data.name=dgl", f"--data.path={tmp / 'graph.bin'}"]


def setup_partition_folder_other_graph(tmp):
    assert main(["partition", *TINY, f"--partition.out_dir={tmp / 'parts'}"]) == 0
    return ["train", *TINY, "--data.synthetic.num_nodes=400", f"--partition.out_dir={tmp / 'parts'}"]


def setup_partition_folder_foreign(tmp):
    (tmp / "parts").mkdir()
    (tmp / "parts" / "notes.txt").write_text("mine")
    return ["train", *TINY, f"--partition.out_dir={tmp / 'parts'}"]


def setup_dropin_node_correction(tmp):
    return ["compare", "--compare.dropin=true", "--grappa.correction=node"]


def setup_port_in_use(tmp):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    setup_port_in_use.sock = sock  # held until the case has run
    return ["train", *TINY, f"--launch.master_port={sock.getsockname()[1]}"]


def setup_checkpoint_other_model(tmp):
    ck = _fake_checkpoint(tmp / "ck", TINY + ["--model.hidden=16"])
    return ["train", *TINY, f"--resume={ck}"]


def setup_checkpoint_corrupt(tmp):
    ck = _fake_checkpoint(tmp / "ck", TINY)
    ck.write_bytes(ck.read_bytes()[:100])
    return ["train", *TINY, f"--resume={ck}"]


def setup_checkpoint_not_a_checkpoint(tmp):
    torch.save({"weight": torch.zeros(3)}, tmp / "model.pt")  # a state dict, not a checkpoint
    return ["train", *TINY, f"--resume={tmp / 'model.pt'}"]


def setup_checkpoint_runs_code(tmp):
    # A pickle that would run a command when unpickled: weights_only loading refuses it unrun.
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {tmp / 'pwned'}",))

    torch.save({"model": Evil()}, tmp / "evil.pt", pickle_module=pickle)
    return ["train", *TINY, f"--resume={tmp / 'evil.pt'}"]


def setup_checkpoint_missing(tmp):
    return ["train", *TINY, f"--resume={tmp / 'ckpt-e000003.pt'}"]


def setup_checkpoints_all_corrupt(tmp):
    for e in (1, 2):
        ck = _fake_checkpoint(tmp / "run" / "checkpoints", TINY, epoch=e)
        ck.write_bytes(b"x" * ck.stat().st_size)
    return ["train", *TINY, f"--run.output_dir={tmp / 'run'}", "--resume"]


def setup_resume_wrong_command(tmp):
    return ["partition", "--resume"]


def setup_worker_without_train_nodes(tmp):
    _user_graph(tmp / "graph.bin", seedless_half=True)
    return [
        "train",
        *TINY,
        "--data.name=dgl",
        f"--data.path={tmp / 'graph.bin'}",
        "--grappa.correction=none",
        f"--run.output_dir={tmp / 'run'}",
    ]


def setup_disk_full_checkpoint(tmp):
    # hidden 128: a checkpoint (model + Adam) of about 250 KB, so the 400 KB tmpfs holds one
    return [
        "train",
        *TINY,
        "--model.hidden=128",
        f"--run.output_dir={tmp / 'run'}",
        f"--checkpoint.dir={tmp / 'ck'}",
        "--train.epochs=3",
    ]


def setup_disk_full_partition(tmp):
    return ["partition", *TINY, f"--partition.out_dir={tmp / 'ck'}"]  # ck: a 64 KB tmpfs, too small for the parts


DGL_FILES = (
    "grappa.json",
    "part0/graph.dgl",
    "part0/node_feat.dgl",
    "part0/edge_feat.dgl",
    "part1/graph.dgl",
    "part1/node_feat.dgl",
    "part1/edge_feat.dgl",
)


def setup_disk_full_prepare(tmp):
    # DGL's files of a partition folder (as another tool writes them) on a tmpfs with room for them and
    # about one aggregate table more: preparing them fills the disk part-way
    assert main(["partition", *TINY, f"--partition.out_dir={tmp / 'parts'}"]) == 0
    pages = sum(-(-(tmp / "parts" / f).stat().st_size // 4096) for f in DGL_FILES)
    TMPFS["disk-full-prepare"] = (
        f"{4 * pages + 40}k",
        " && ".join(
            f"mkdir -p {tmp / 'ck' / Path(f).parent} && cp {tmp / 'parts' / f} {tmp / 'ck' / f}" for f in DGL_FILES
        ),
    )
    return ["prepare", "--part-config", str(tmp / "ck")]


SUBPROCESS = {
    "disk-full-checkpoint",
    "disk-full-partition",
    "disk-full-prepare",  # a private mount namespace
    "partition-folder-read-only",
}
TMPFS = {
    "disk-full-checkpoint": ("400k", ""),
    "disk-full-partition": ("64k", ""),
    "partition-folder-read-only": ("64k,ro", ""),
}
"""case -> (the tmpfs' size, what is copied onto it first)."""


def _run_in_tmpfs(tmp: Path, args: list[str], case: str) -> tuple[int, str]:
    """The command with ``{tmp}/ck`` on a small tmpfs in a private mount namespace (root).

    disk-full-checkpoint: one checkpoint of the tiny model fits, the second does not (the first
    is kept until a new one is complete). A copy of the folder is taken before the namespace
    goes away.
    """
    from dgl_grappa.cluster.netns import check_isolation

    why = check_isolation(net=False, shm="64m")
    if why is not None:
        pytest.skip(f"a private mount namespace is needed: {why}")
    ck = tmp / "ck"
    ck.mkdir()
    size, fill = TMPFS[case]
    cmd = " ".join(["exec", sys.executable, "-m", "dgl_grappa", *args])
    script = (
        f"mount -t tmpfs -o size={size} tmpfs {ck} {'&& ' + fill if fill else ''} && ( {cmd} ); rc=$?; "
        f"cp -a {ck} {tmp / 'ck-copy'}; exit $rc"
    )
    env = dict(os.environ, DGLBACKEND="pytorch", PYTHONPATH=str(ROOT))
    p = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    return p.returncode, p.stderr


def check_disk_full(tmp: Path) -> None:
    from dgl_grappa.runtime.checkpoint import CheckpointStore

    store = CheckpointStore(tmp / "ck-copy")
    point = store.newest_valid()
    assert point is not None and point.epoch == 1, "the checkpoint written before the disk filled is intact"
    ck = torch.load(point.path, weights_only=True)
    assert ck["epoch"] == 1 and ck["model"]
    assert not list((tmp / "ck-copy").glob(".ckpt-*")), "no temporary file is left"


def check_partition_undone(tmp: Path) -> None:
    assert not list((tmp / "ck-copy").iterdir()), "nothing of the failed partitioning is left"


def check_read_only_untouched(tmp: Path) -> None:
    assert not list((tmp / "ck-copy").iterdir()) and not (tmp / "run").exists(), "nothing was written"


def check_prepare_undone(tmp: Path) -> None:
    left = sorted(str(p.relative_to(tmp / "ck-copy")) for p in (tmp / "ck-copy").rglob("*") if p.is_file())
    assert left == sorted(DGL_FILES), f"the folder is as it was, no temporary file left: {left}"


def check_truncated(tmp: Path) -> None:
    from dgl_grappa.partition.layout import read_stats
    from dgl_grappa.partition.store import folder_problem

    out = tmp / "run" / "partitions" / "0"
    assert folder_problem(out, read_stats(out)) is None, "the broken partitioning was rebuilt"


def check_seedless(tmp: Path) -> None:
    s = json.loads((tmp / "run" / "summary.json").read_text())
    assert sorted(w["train_seeds"] == 0 for w in s["workers"]) == [False, True]
    assert s["epochs"] == 2 and s["val_acc"] is not None


AFTER = {
    "disk-full-checkpoint": check_disk_full,
    "disk-full-partition": check_partition_undone,
    "partition-folder-read-only": check_read_only_untouched,
    "disk-full-prepare": check_prepare_undone,
    "truncated-part-file": check_truncated,
    "worker-without-train-nodes": check_seedless,
}
WRITES = {
    "disk-full-checkpoint",
    "truncated-part-file",
    "worker-without-train-nodes",  # handled or mid-run
    "disk-full-partition",
    "disk-full-prepare",
    "features-huge",
    "partition-folder-read-only",
}
ROWS = documented()


@pytest.mark.unit
def test_the_table_lists_every_case_and_every_case_has_a_row():
    cases = {name[len("setup_") :].replace("_", "-") for name in globals() if name.startswith("setup_")}
    assert set(ROWS) == cases, (sorted(set(ROWS) - cases), sorted(cases - set(ROWS)))


@pytest.mark.parametrize("case", sorted(ROWS))
def test_bad_input(case, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths (runs/default, ...) land in the case's folder
    monkeypatch.delenv("DGL_GRAPPA_PLANETOID", raising=False)  # a folder with the files would serve them
    status, doc = ROWS[case]
    args = globals()["setup_" + case.replace("-", "_")](tmp_path)
    capfd.readouterr()
    before = snapshot(tmp_path)
    if case in SUBPROCESS:
        rc, err = _run_in_tmpfs(tmp_path, args, case)
    else:
        try:
            rc = main(args)
        finally:
            sock = getattr(setup_port_in_use, "sock", None)
            if sock is not None:
                sock.close()
                setup_port_in_use.sock = None
            lock = getattr(setup_output_dir_in_use, "lock", None)
            if lock is not None:
                lock.release()
                setup_output_dir_in_use.lock = None
        err = capfd.readouterr().err
    text = err.replace(str(tmp_path), "{tmp}")
    assert rc == status, f"exit status {rc}, expected {status}:\n{err[-3000:]}"
    assert "Traceback" not in err and "[bt]" not in err, err[-3000:]
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if status != 0:
        errors = [ln for ln in lines if ln.startswith("dgl_grappa: error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0], lines[-5:]
        got = errors[0][len("dgl_grappa: error: ") :]
        assert message_regex(doc).fullmatch(got), f"\n  documented: {doc}\n  got:        {got}"
    else:
        assert any(message_regex(doc).search(ln) for ln in lines), f"no log line matches {doc!r}:\n" + "\n".join(
            lines[-15:]
        )
    if case not in WRITES:
        assert snapshot(tmp_path) == before, "a bad input wrote or changed files"
        assert not (tmp_path / "runs").exists()
    if case in AFTER:
        AFTER[case](tmp_path)


@pytest.mark.unit
def test_lying_inputs_are_refused_by_the_checks_themselves(tmp_path):
    """The fast subset's share of the table: the checks behind a few rows, without a command."""
    from dgl_grappa.config import ConfigError, load_config
    from dgl_grappa.data.user import check_class_ids

    (tmp_path / "dup.yaml").write_text("model:\n  hidden: 8\n  hidden: 16\n")
    with pytest.raises(ConfigError, match=r"key 'hidden' is given twice in one block \(lines 2 and 3\)"):
        load_config(str(tmp_path / "dup.yaml"))
    assert load_config(None, ["--name=run 7"]).name == "run 7"  # a plain name, spaces and all
    for bad in ("../x", "a/b", ".."):
        with pytest.raises(ConfigError, match="is not a plain name"):
            load_config(None, [f"--name={bad}"])
    check_class_ids(torch.tensor([0, 4, 1, -1]), 5, "labels")  # 5 nodes, 5 classes at most
    with pytest.raises(ConfigError, match=r"hold class id 5 \(node 1\), but 5 nodes"):
        check_class_ids(torch.tensor([0, 5, 1]), 5, "labels")
