"""cluster/: ip_config parsing, torchrun/Slurm identities, placement, remote command quoting, killing process trees."""

import ast
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from dgl_grappa.cluster.access import HostAccess, SshAccess, host_access
from dgl_grappa.cluster.hosts import (
    IpConfigEntry,
    Remote,
    WorkerIdentity,
    expand_nodelist,
    expand_tasks_per_node,
    format_ip_config,
    parse_ip_config,
    place_workers,
    read_ip_config,
    remote_argv,
    shell_command,
    torchrun_env,
    worker_identity,
)
from dgl_grappa.cluster.procs import JobFailed
from dgl_grappa.cluster.ptree import kill_job, kill_session, kill_tree
from dgl_grappa.cluster.remote import Cluster
from dgl_grappa.config import ConfigError, load_config
from dgl_grappa.env import ENV_JOB

# --- ip_config ---------------------------------------------------------------------------


@pytest.mark.unit
def test_ip_config_lines_ports_comments():
    text = "# two machines\n\n10.0.0.1 30050   # head\n  10.0.0.2\nnode-3.cluster 40000\n::1 30060\n"
    assert parse_ip_config(text) == [
        IpConfigEntry("10.0.0.1", 30050),
        IpConfigEntry("10.0.0.2", None),
        IpConfigEntry("node-3.cluster", 40000),
        IpConfigEntry("::1", 30060),
    ]


@pytest.mark.unit
def test_ip_config_same_ip_different_ports_is_fine_but_duplicates_are_not():
    assert len(parse_ip_config("127.0.0.1 30050\n127.0.0.1 30060\n")) == 2
    # no port = DGL's default 30050, so this repeats line 1
    with pytest.raises(ConfigError, match=r"line 2: 127.0.0.1 port 30050 repeats line 1"):
        parse_ip_config("127.0.0.1 30050\n127.0.0.1\n")


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, match",
    [
        ("10.0.0.1 30050 2\n", r"ip_config line 1: .* has 3 fields"),
        ("10.0.0.1\n10.0.0.2 port\n", r"line 2: port 'port' must be a number"),
        ("10.0.0.1 70000\n", r"port '70000' must be a number between 1 and 65535"),
        ("bad_host!\n", r"neither an IP address nor a host name"),
        ("# only a comment\n\n", r"no machine listed"),
    ],
)
def test_ip_config_junk_is_one_line_error(text, match):
    with pytest.raises(ConfigError, match=match) as e:
        parse_ip_config(text)
    assert "\n" not in str(e.value)


@pytest.mark.unit
def test_ip_config_file_roundtrip_is_dgl_clean(tmp_path):
    p = tmp_path / "ip_config.txt"
    p.write_text("# c\n10.0.0.1\n10.0.0.2 30060\n")
    entries = read_ip_config(p)
    text = format_ip_config(entries)
    # DGL's own reader accepts no comments or blank lines and needs explicit structure
    assert text == "10.0.0.1 30050\n10.0.0.2 30060\n"
    assert parse_ip_config(text) == [IpConfigEntry("10.0.0.1", 30050), IpConfigEntry("10.0.0.2", 30060)]
    with pytest.raises(ConfigError, match="cannot read ip_config"):
        read_ip_config(tmp_path / "missing.txt")


# --- Slurm lists -------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, hosts",
    [
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("node[01-03,07],gpu5", ["node01", "node02", "node03", "node07", "gpu5"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("a[8-11]", ["a8", "a9", "a10", "a11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("single", ["single"]),
        ("x[1],y", ["x1", "y"]),
    ],
)
def test_expand_nodelist(text, hosts):
    assert expand_nodelist(text) == hosts


@pytest.mark.unit
@pytest.mark.parametrize("text", ["node[1-3", "node1-3]", "node[3-1]", "node[a-b]", "a,,b", "n[[1]]"])
def test_expand_nodelist_rejects_junk(text):
    with pytest.raises(ConfigError, match="host list"):
        expand_nodelist(text)


@pytest.mark.unit
def test_expand_tasks_per_node():
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    with pytest.raises(ConfigError, match="SLURM_TASKS_PER_NODE"):
        expand_tasks_per_node("2(3)")


# --- identities --------------------------------------------------------------------------

TORCHRUN = {
    "RANK": "5",
    "WORLD_SIZE": "8",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "4",
    "GROUP_RANK": "1",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29510",
}


def _changed(env: dict, change: dict) -> dict:
    """``env`` with ``change`` applied; a None value removes the variable."""
    return {k: v for k, v in {**env, **change}.items() if v is not None}


@pytest.mark.unit
def test_torchrun_identity_and_roundtrip():
    ident = worker_identity(TORCHRUN)
    assert ident == WorkerIdentity(5, 8, 1, 4, 1, "10.0.0.1", 29510, "torchrun")
    assert worker_identity(torchrun_env(ident)) == ident


@pytest.mark.unit
def test_torchrun_host_index_without_group_rank():
    env = {k: v for k, v in TORCHRUN.items() if k != "GROUP_RANK"}
    assert worker_identity(env).host_index == 1  # 5 // 4
    # hand-set environment (the DistDGL recipe): one worker per host
    bare = {"RANK": "3", "WORLD_SIZE": "4", "MASTER_ADDR": "h0", "MASTER_PORT": "29500"}
    ident = worker_identity(bare)
    assert (ident.host_index, ident.local_rank, ident.local_world_size) == (3, 0, 1)


@pytest.mark.unit
@pytest.mark.parametrize(
    "change, match",
    [
        ({"RANK": "8"}, r"RANK=8 must be in \[0, WORLD_SIZE=8\)"),
        ({"RANK": "x"}, r"RANK='x' is not an integer"),
        ({"WORLD_SIZE": None}, r"WORLD_SIZE is not set"),
        ({"MASTER_ADDR": None}, r"MASTER_ADDR is not set"),
        ({"MASTER_PORT": "0"}, r"MASTER_PORT=0 must be between"),
        ({"LOCAL_RANK": "4"}, r"LOCAL_RANK=4 must be in \[0, LOCAL_WORLD_SIZE=4\)"),
        ({"LOCAL_WORLD_SIZE": None}, r"LOCAL_RANK is set but LOCAL_WORLD_SIZE is not"),
        ({"LOCAL_WORLD_SIZE": "9"}, r"LOCAL_WORLD_SIZE=9 must be in \[1, WORLD_SIZE=8\]"),
        ({"RANK": "0", "LOCAL_RANK": "1"}, r"LOCAL_RANK=1 exceeds RANK=0"),
    ],
)
def test_torchrun_inconsistent(change, match):
    with pytest.raises(ConfigError, match=match):
        worker_identity(_changed(TORCHRUN, change))


SLURM = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "7",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "2",
    "SLURM_NODELIST": "node[01-03,07]",
    "SLURM_TASKS_PER_NODE": "2(x3),1",
    "SLURM_JOB_ID": "123456",
}


@pytest.mark.unit
def test_slurm_identity():
    ident = worker_identity(SLURM)
    assert ident == WorkerIdentity(5, 7, 1, 2, 2, "node01", 20000 + 123456 % 10000, "slurm")
    # explicit MASTER_* win; SLURMD_NODENAME stands in for SLURM_NODEID
    env = {k: v for k, v in SLURM.items() if k != "SLURM_NODEID"}
    ident = worker_identity(
        {
            **env,
            "SLURMD_NODENAME": "node07",
            "SLURM_PROCID": "6",
            "SLURM_LOCALID": "0",
            "MASTER_ADDR": "10.1.1.1",
            "MASTER_PORT": "29999",
        }
    )
    assert (ident.host_index, ident.local_world_size, ident.master_addr, ident.master_port) == (3, 1, "10.1.1.1", 29999)


@pytest.mark.unit
def test_torchrun_wins_over_slurm():
    assert worker_identity({**SLURM, **TORCHRUN}).source == "torchrun"


@pytest.mark.unit
@pytest.mark.parametrize(
    "change, match",
    [
        ({"SLURM_PROCID": "7"}, r"SLURM_PROCID=7 must be in \[0, SLURM_NTASKS=7\)"),
        ({"SLURM_NODEID": "4"}, r"SLURM_NODEID=4 but SLURM_NODELIST has 4 hosts"),
        ({"SLURM_TASKS_PER_NODE": "2(x4)"}, r"adds up to 8, SLURM_NTASKS=7"),
        ({"SLURM_TASKS_PER_NODE": "2(x2),3"}, r"gives 3 hosts, SLURM_NODELIST 4"),
        ({"SLURM_LOCALID": "2"}, r"SLURM_LOCALID=2 must be in \[0, 2\)"),
        ({"SLURM_NODELIST": None}, r"SLURM_NODELIST is not set"),
        ({"SLURM_NTASKS": None}, r"SLURM_NTASKS is not set"),
    ],
)
def test_slurm_inconsistent(change, match):
    with pytest.raises(ConfigError, match=match):
        worker_identity(_changed(SLURM, change))


@pytest.mark.unit
def test_no_environment():
    with pytest.raises(ConfigError, match="no torchrun or Slurm environment"):
        worker_identity({"HOME": "/root"})


# --- placement ---------------------------------------------------------------------------


@pytest.mark.unit
def test_placement_host_by_host():
    slots = place_workers(5, ["a", "b", "c"], workers_per_host=2)
    assert [(s.rank, s.host_index, s.host, s.local_rank) for s in slots] == [
        (0, 0, "a", 0),
        (1, 0, "a", 1),
        (2, 1, "b", 0),
        (3, 1, "b", 1),
        (4, 2, "c", 0),
    ]
    assert [s.host for s in place_workers(2, ["a", "b"])] == ["a", "b"]


@pytest.mark.unit
def test_placement_errors():
    with pytest.raises(ConfigError, match=r"5 workers do not fit on 2 hosts x 2 per host; .*workers_per_host=3"):
        place_workers(5, ["a", "b"], 2)
    with pytest.raises(ConfigError, match="no hosts"):
        place_workers(1, [])
    with pytest.raises(ConfigError, match="workers_per_host=0"):
        place_workers(1, ["a"], 0)


# --- remote commands ---------------------------------------------------------------------

NASTY = ["it's", 'say "hi"', "$HOME", "`id`", "a;b", "x y", "", "*", "new\nline", "--flag", "é"]


@pytest.mark.unit
def test_ssh_argv():
    r = Remote(
        "ssh",
        user="alice",
        port=2222,
        identity_file="/keys/id ed",
        ssh_options=("-o", "ConnectTimeout=5"),
        env={"NCCL_DEBUG": "WARN"},
    )
    argv = remote_argv(r, 1, "10.0.0.2", ["python", "-m", "dgl_grappa", "worker"], env={"RANK": "1"}, cwd="/w d")
    assert argv[:9] == ["ssh", "-o", "BatchMode=yes", "-p", "2222", "-i", "/keys/id ed", "-o", "ConnectTimeout=5"]
    assert argv[9] == "alice@10.0.0.2"
    assert argv[10] == "cd '/w d' && exec env NCCL_DEBUG=WARN RANK=1 python -m dgl_grappa worker"
    assert len(argv) == 11  # ssh sends ONE string to the remote shell: the whole command
    assert remote_argv(Remote("ssh"), 0, "h", ["true"])[-2:] == ["h", "exec true"]


@pytest.mark.unit
def test_remote_kinds_share_the_shell_string():
    script = shell_command(["echo", "x"], {"A": "1"}, "/tmp")
    assert remote_argv(Remote("ssh"), 0, "h", ["echo", "x"], {"A": "1"}, "/tmp")[-1] == script
    assert remote_argv(
        Remote("netns", prefixes=(("nsenter", "--net=/x", "--"),)), 0, "h", ["echo", "x"], {"A": "1"}, "/tmp"
    ) == ["nsenter", "--net=/x", "--", "sh", "-c", script]
    assert remote_argv(Remote("none"), 0, "h", ["echo", "x"], {"A": "1"}, "/tmp") == ["sh", "-c", script]


@pytest.mark.unit
def test_remote_errors():
    with pytest.raises(ConfigError, match="launch.remote='rsh' is unknown"):
        remote_argv(Remote("rsh"), 0, "h", ["true"])
    with pytest.raises(ConfigError, match="host 2 has no namespace prefix"):
        remote_argv(Remote("netns", prefixes=(("a",), ("b",))), 2, "h", ["true"])
    with pytest.raises(ConfigError, match="environment variable name 'A B' is invalid"):
        shell_command(["true"], {"A B": "1"})


# --- how hosts are reached ------------------------------------------------------------------


def _launch(*args: str):
    return load_config(None, ["--partition.num_parts=2", *args])


@pytest.mark.unit
def test_ssh_access_reaches_hosts_through_the_shared_interface(caplog):
    cfg = _launch(
        "--launch.remote=ssh",
        "--launch.hosts=[a,b]",
        "--launch.ssh_user=me",
        "--launch.ssh_port=2222",
        "--launch.ssh_options=[StrictHostKeyChecking=no]",
    )
    access = host_access(cfg, 2, "job")
    assert isinstance(access, SshAccess) and isinstance(access, HostAccess)
    entries, remote = access.open([IpConfigEntry("a"), IpConfigEntry("b", 30060)])
    assert entries == [IpConfigEntry("a"), IpConfigEntry("b", 30060)]
    assert remote == Remote("ssh", user="me", port=2222, ssh_options=("-o", "StrictHostKeyChecking=no"))
    assert access.local_env() == dict(os.environ)  # ssh needs HOME, SSH_AUTH_SOCK
    assert (access.default_threads(2, 4), access.wire_bytes(), access.describe([])) == (0, None, {})
    # closing kills the job on every host that ran something; one unreachable host is a warning, not an error
    killed = []

    def kill_on(i):
        killed.append(i)
        if i == 1:
            raise JobFailed("host 1 is down")

    with caplog.at_level("WARNING", logger="dgl_grappa"):
        access.close(kill_on, [0, 1])
    assert killed == [0, 1] and "could not reach host 1 to kill job job: host 1 is down" in caplog.text
    with Cluster(cfg, 2, "job") as cl:
        assert cl.remote == Remote("ssh", user="me", port=2222, ssh_options=("-o", "StrictHostKeyChecking=no"))
        assert cl.threads_per_worker() == 0 and cl.threads_per_worker(3) == 3 and cl.wire_bytes() is None
        assert cl.describe() == {
            "remote": "ssh",
            "workers_per_host": 1,
            "hosts": [{"host": 0, "address": "a", "ranks": [0]}, {"host": 1, "address": "b", "ranks": [1]}],
        }
    with pytest.raises(ConfigError, match="launch.remote='none' starts no hosts; use ssh or netns"):
        host_access(_launch(), 2, "job")


HARNESS_PROBE = """
import sys
from dgl_grappa.cluster.remote import Cluster
from dgl_grappa.config import load_config

kind = sys.argv[1]
cfg = load_config(None, ["--partition.num_parts=2", "--launch.remote=" + kind]
                  + (["--launch.hosts=[a,b]"] if kind == "ssh" else []))
cl = Cluster(cfg, 2, "job")
if kind == "ssh":  # opening and closing reach no host over ssh (only a command would)
    cl.open()
    cl.close()
print(type(cl.access).__name__, sorted(m for m in sys.modules if m.startswith("dgl_grappa.cluster.testhosts")))
"""


def test_an_ssh_launch_never_loads_the_test_host_harness():
    out = subprocess.run([sys.executable, "-c", HARNESS_PROBE, "ssh"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "SshAccess []\n"
    # ... while a netns launch does (only its checks run here: no host is made)
    out = subprocess.run([sys.executable, "-c", HARNESS_PROBE, "netns"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("TestHostAccess [") and "'dgl_grappa.cluster.testhosts.access'" in out.stdout


def test_shell_string_roundtrips_through_a_real_shell(tmp_path):
    # The string ssh would send, executed by sh (what the remote login shell does): argv,
    # environment and working directory arrive unchanged, whatever their characters.
    d = tmp_path / "dir with 'quote'"
    d.mkdir()
    code = "import json, os, sys; print(json.dumps([sys.argv[1:], os.environ['ODD'], os.getcwd()]))"
    argv = remote_argv(
        Remote("none"), 0, "", [sys.executable, "-c", code, *NASTY], env={"ODD": "; rm -rf $X '\""}, cwd=str(d)
    )
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == [NASTY, "; rm -rf $X '\"", str(d)]


# --- killing process trees (real processes) ------------------------------------------------

SLEEP = [sys.executable, "-c", "import time; time.sleep(300)"]

# A parent with two children, one of which starts a grandchild in a session of its own
# (as DGL's and torch's helpers do); prints [child, child, grandchild].
TREE = f"""
import json, signal, subprocess, sys, time
a = subprocess.Popen({SLEEP!r})
b = subprocess.Popen([sys.executable, "-c", "import subprocess, time; g = subprocess.Popen({SLEEP!r}, "
                      "start_new_session=True); print(g.pid, flush=True); time.sleep(300)"],
                     stdout=subprocess.PIPE, text=True)
print(json.dumps([a.pid, b.pid, int(b.stdout.readline())]), flush=True)
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reap killed children at once, as a launcher does
time.sleep(300)
"""

# A process whose child leaves a daemon behind: the daemon is re-parented away from the tree
# (to init) but stays in its process group; prints the daemon's PID, then exits.
ORPHAN = f"""
import subprocess, sys
mid = subprocess.Popen([sys.executable, "-c", "import subprocess; print(subprocess.Popen({SLEEP!r}).pid)"],
                       stdout=subprocess.PIPE, text=True)
daemon = mid.stdout.readline().strip()
mid.wait()
print(daemon, flush=True)
"""


def _start(code: str, **kw) -> tuple[subprocess.Popen, list[int]]:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, **kw)
    ready, _, _ = select.select([p.stdout], [], [], 60)
    if not ready:
        p.kill()
        pytest.fail("the process tree did not start within 60 s")
    pids = json.loads(p.stdout.readline())
    return p, pids if isinstance(pids, list) else [pids]


def _dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # killed, its parent not yet reaping
    except psutil.NoSuchProcess:
        return True


def _dies(pid: int, timeout_s: float = 20.0) -> bool:
    # A group's members get SIGKILL but nobody waits for them: give the kernel a bounded while.
    try:
        psutil.wait_procs([psutil.Process(pid)], timeout=timeout_s)
    except psutil.NoSuchProcess:
        pass
    return _dead(pid)


def _cleanup(pids) -> None:
    # Only when an assertion failed: nothing of the test may outlive it.
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_kill_tree_kills_children_and_a_grandchild_in_its_own_session():
    p, pids = _start(TREE)
    try:
        g = psutil.Process(pids[2])
        assert g.pid == os.getsid(g.pid) != os.getsid(p.pid)  # the grandchild leads a session of its own
        assert kill_tree(p.pid, timeout_s=20) == 4
        # kill_tree waited for them: none is left running when it returns.
        assert [pid for pid in [p.pid, *pids] if not _dead(pid)] == []
    finally:
        _cleanup([p.pid, *pids])


def test_kill_tree_can_spare_the_root():
    p, pids = _start(TREE)
    try:
        assert kill_tree(p.pid, include_self=False, timeout_s=20) == 3
        assert [pid for pid in pids if not _dead(pid)] == []
        assert p.poll() is None and not _dead(p.pid)
    finally:
        _cleanup([p.pid, *pids])
        p.wait(timeout=10)


def test_kill_session_kills_what_left_the_tree_through_the_group():
    p, [daemon] = _start(ORPHAN + "import time; time.sleep(300)\n", start_new_session=True)
    try:
        assert daemon not in [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
        assert os.getpgid(daemon) == p.pid  # only the group still ties it to the session
        kill_session(p, timeout_s=20)
        assert p.returncode == -signal.SIGKILL  # reaped by Popen, which saw the real status
        assert _dies(daemon)
    finally:
        _cleanup([p.pid, daemon])


def test_kill_session_after_the_leader_exited_still_kills_its_group():
    p, [daemon] = _start(ORPHAN, start_new_session=True)
    try:
        assert p.wait(timeout=30) == 0 and not _dead(daemon)
        kill_session(p, timeout_s=20)
        assert _dies(daemon)
    finally:
        _cleanup([daemon])


def test_kill_job_kills_exactly_the_tagged_processes():
    tag = os.urandom(8).hex()
    tagged, pids = _start(TREE, env=dict(os.environ, **{ENV_JOB: tag}))
    other = subprocess.Popen(SLEEP, env=dict(os.environ, **{ENV_JOB: tag + "-other"}))
    try:
        assert kill_job(tag, timeout_s=20) == 4
        assert [pid for pid in [tagged.pid, *pids] if not _dead(pid)] == []
        assert other.poll() is None
    finally:
        _cleanup([tagged.pid, *pids, other.pid])
        tagged.wait(timeout=10)
        other.wait(timeout=10)


# --- the guard's imports --------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "dgl_grappa"
LIGHT = {"psutil"}  # besides the standard library


def heavy_imports(module: str, package_dir: Path = PACKAGE) -> list[str]:
    """Imports outside the standard library and :data:`LIGHT` that importing ``module`` runs.

    Follows the package's own modules (and the ``__init__`` of each package on the way),
    function-level imports included: they run on the remote host as surely, only later.
    """
    top = package_dir.name

    def source(mod: str) -> Path | None:
        rel = mod.split(".")[1:]
        if not rel:
            return package_dir / "__init__.py"
        for f in (package_dir.joinpath(*rel[:-1], rel[-1] + ".py"), package_dir.joinpath(*rel, "__init__.py")):
            if f.is_file():
                return f
        return None

    heavy, seen, todo = [], set(), [module]
    while todo:
        mod = todo.pop()
        parts = mod.split(".")
        for m in [".".join(parts[:i]) for i in range(1, len(parts) + 1)]:
            path = source(m)
            if m in seen or path is None:
                continue
            seen.add(m)
            here = m if path.name == "__init__.py" else m.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        pkg = here.split(".")[: len(here.split(".")) - node.level + 1]
                        base = ".".join(pkg + ([base] if base else []))
                    names = [base] + [f"{base}.{a.name}" for a in node.names]
                else:
                    continue
                for name in names:
                    if name.split(".")[0] == top:
                        todo.append(name)
                    elif name.split(".")[0] not in sys.stdlib_module_names | LIGHT and name not in heavy:
                        heavy.append(name)
    return heavy


@pytest.mark.unit
def test_the_guard_imports_nothing_heavy():
    # It runs on remote hosts as `python -m dgl_grappa.cluster.guard`, before torch or DGL are importable.
    assert heavy_imports("dgl_grappa.cluster.guard") == []


@pytest.mark.unit
def test_the_import_scan_follows_the_package_into_function_level_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("import os\n")
    (pkg / "sub" / "a.py").write_text("import psutil\nfrom ..b import f\n")
    (pkg / "b.py").write_text("def f():\n    import torch.nn\n")
    assert heavy_imports("pkg.sub.a", pkg) == ["torch.nn"]
    assert heavy_imports("pkg.sub", pkg) == []
