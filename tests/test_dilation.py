"""Time dilation of test hosts: the arithmetic (D, CPU shares, dilated links) and the config keys.

Pure functions only (``unit``: no root, no process); the cgroups and links themselves are
tested on real test hosts in tests/test_testhosts.py.
"""

import pytest

from dgl_grappa.cluster.netns import rate_bits
from dgl_grappa.cluster.testhosts.dilation import (
    CFS_PERIOD_US,
    HostCpus,
    dilated_latency_ms,
    dilated_rate,
    dilation_factor,
    format_cpu_list,
    host_cpu_share,
    parse_cpu_list,
    parse_dilation,
    plan_host_cpus,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "hosts,cores,share,d",
    [
        (2, 2, 1.0, 1.0),  # a whole core each
        (2, 1, 0.5, 2.0),  # both hosts on one core: half a core each
        (4, 2, 0.5, 2.0),
        (3, 2, 2 / 3, 1.5),
        (8, 2, 0.25, 4.0),
        (2, 8, 4.0, 1.0),  # more than a core each: no dilation
        (3, 4, 1.0, 1.0),  # the fourth core stays idle
        (1, 1, 1.0, 1.0),
    ],
)
def test_auto_dilation_is_the_share_denominator(hosts, cores, share, d):
    assert host_cpu_share(hosts, cores) == pytest.approx(share)
    assert dilation_factor("auto", hosts, cores) == pytest.approx(d)
    assert dilation_factor("off", hosts, cores) == 1.0
    assert dilation_factor("2.5", hosts, cores) == 2.5 and dilation_factor(3, hosts, cores) == 3.0
    # what the emulation rests on: a host's compute rate (share) times D is one core, when the share is below one
    if share < 1:
        assert share * d == pytest.approx(1.0)


def test_parse_dilation_and_its_errors():
    assert parse_dilation("auto") == "auto" and parse_dilation(" Off ") == "off"
    assert parse_dilation("2") == 2.0 and parse_dilation(0.5) == 0.5
    for bad in ("0", "-1", "fast", "", "nan", "inf"):
        with pytest.raises(ValueError, match="network.dilation=.* is not auto, off or a factor > 0") as e:
            parse_dilation(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError):
        host_cpu_share(0, 2)


@pytest.mark.parametrize(
    "rate,d,want",
    [
        ("1gbit", 2, "500mbit"),
        ("1gbit", 4, "250mbit"),
        ("1gbit", 1, "1gbit"),
        ("200mbit", 2.5, "80mbit"),
        ("1gbit", 3, "333333333bit"),
        ("500kbit", 2, "250kbit"),
        ("1gbit", 0.5, "2gbit"),
        ("1.5gbit", 2, "750mbit"),
    ],
)
def test_dilated_rate(rate, d, want):
    got = dilated_rate(rate, d)
    assert got == want
    assert rate_bits(got) == pytest.approx(rate_bits(rate) / d, rel=1e-8)  # still a tc rate, and the right one


def test_dilated_rate_errors_and_latency():
    with pytest.raises(ValueError, match="is not a tc rate"):
        dilated_rate("fast", 2)
    with pytest.raises(ValueError, match="must be > 0"):
        dilated_rate("1gbit", 0)
    assert dilated_latency_ms(5.0, 2) == 10.0 and dilated_latency_ms(0.0, 4) == 0.0


def test_cpu_lists():
    assert parse_cpu_list("0") == [0] and parse_cpu_list("0-2,5, 7-8") == [0, 1, 2, 5, 7, 8]
    assert parse_cpu_list("3,1,1-2") == [1, 2, 3]
    for text in ("", "a", "1-", "3-1", "1,,2", "-1"):
        with pytest.raises(ValueError, match="is not a cpu list"):
            parse_cpu_list(text)
    for cpus in ([0], [0, 1, 2, 5], [1, 3, 5], list(range(16))):
        assert parse_cpu_list(format_cpu_list(cpus)) == cpus
    assert format_cpu_list([4, 0, 1, 2]) == "0-2,4"


def test_plan_whole_cores_are_disjoint():
    plan = plan_host_cpus(2, [0, 1])
    assert plan == [HostCpus("0"), HostCpus("1")] and all(p.quota_us == -1 for p in plan)
    plan = plan_host_cpus(2, [2, 3, 4, 5, 6])  # 2 cores each, the fifth idle
    assert [p.cpus for p in plan] == ["2-3", "4-5"] and [p.share for p in plan] == [2.0, 2.0]


def test_plan_quota_shares():
    plan = plan_host_cpus(2, [1])
    assert [(p.cpus, p.quota_us, p.period_us) for p in plan] == [("1", CFS_PERIOD_US // 2, CFS_PERIOD_US)] * 2
    plan = plan_host_cpus(4, [0, 1])  # hosts divide evenly: two per core, half a core each
    assert [p.cpus for p in plan] == ["0", "0", "1", "1"] and {p.share for p in plan} == {0.5}
    plan = plan_host_cpus(3, [0, 1])  # they do not: all on both cores, 2/3 of a core each
    assert {p.cpus for p in plan} == {"0-1"} and plan[0].share == pytest.approx(2 / 3, rel=1e-3)
    # a share too small for a 1 ms quota at the default period: the period grows instead
    plan = plan_host_cpus(64, [0])
    assert plan[0].quota_us >= 1000 and plan[0].share == pytest.approx(1 / 64, rel=1e-2)
    for hosts, cpus in ((2, [1]), (4, [0, 1]), (3, [0, 1]), (64, [0]), (2, [0, 1]), (2, [0, 1, 2, 3])):
        for p in plan_host_cpus(hosts, cpus):
            assert p.share == pytest.approx(host_cpu_share(hosts, len(cpus)), rel=1e-2)


def test_join_prefix_runs_the_rest_of_the_command():
    from dgl_grappa.cluster.testhosts.cgroups import join_prefix

    p = join_prefix(["/sys/fs/cgroup/cpu/dgh-x-h0", "/sys/fs/cgroup/cpuset/dgh-x-h0"])
    assert p[:2] == ["sh", "-c"] and p[-3:] == ["/sys/fs/cgroup/cpu/dgh-x-h0", "/sys/fs/cgroup/cpuset/dgh-x-h0", "--"]
    assert 'exec "$@"' in p[2]


# --- the config keys -------------------------------------------------------------------


def test_config_keys_and_one_line_errors(tmp_path):
    from dgl_grappa.config import ConfigError, load_config

    c = load_config(None, [])
    assert c.network.dilation == "auto" and c.network.host_cpus == ""
    c = load_config(None, ["--launch.remote=netns", "--network.dilation=2", "--network.host_cpus=0,2-3"])
    assert c.network.dilation == "2" and parse_cpu_list(c.network.host_cpus) == [0, 2, 3]
    assert load_config(None, ["--network.dilation=off"]).network.dilation == "off"  # allowed everywhere
    yml = tmp_path / "off.yaml"
    yml.write_text("network:\n  dilation: off\n")  # a bare off: YAML reads false
    assert load_config(str(yml), []).network.dilation == "off"
    cases = [
        (["--launch.remote=netns", "--network.dilation=fast"], "network.dilation='fast' is not auto, off or a factor"),
        (["--launch.remote=netns", "--network.dilation=0"], "network.dilation='0' is not auto"),
        (["--launch.remote=netns", "--network.host_cpus=1-0"], "network.host_cpus='1-0' is not a cpu list"),
        (["--launch.remote=netns", "--network.host_cpus=x"], "network.host_cpus='x' is not a cpu list"),
        (
            ["--launch.remote=netns", "--network.host_cpus=0", "--network.dilation=off"],
            "network.dilation=off turns CPU shares off",
        ),
        (["--network.dilation=2"], "network.dilation=2 shares out the CPUs of test hosts"),
        (["--network.host_cpus=0"], "network.host_cpus=0 shares out the CPUs of test hosts"),
        (["--network.cpu_period_ms=0.5"], "network.cpu_period_ms=0.5 is out of range"),
    ]
    for args, match in cases:
        with pytest.raises(ConfigError, match=match) as e:
            load_config(None, args)
        assert "\n" not in str(e.value), args


def test_asked_for_shares_where_cgroups_are_missing_is_one_line(monkeypatch):
    # A machine without cgroup v1 (simulated: problem() says why): asking for shares (a factor or
    # host_cpus) stops before anything is built; auto does not ask (the hosts log it instead).
    from dgl_grappa.cluster.remote import Cluster
    from dgl_grappa.cluster.testhosts import cgroups
    from dgl_grappa.config import ConfigError, load_config

    monkeypatch.setattr(cgroups, "problem", lambda: "CPU shares of test hosts need the cgroup v1 cpu controller")
    for args, key in (
        (["--network.dilation=2"], "network.dilation=2"),
        (["--network.host_cpus=0"], "network.host_cpus=0"),
    ):
        cfg = load_config(None, ["--launch.remote=netns", "--partition.num_parts=2", *args])
        with pytest.raises(ConfigError, match=f"{key} needs CPU shares of the test hosts") as e:
            Cluster(cfg, 2, "job")
        assert "\n" not in str(e.value) and "cgroup v1 cpu controller" in str(e.value)
    for d in ("auto", "off"):
        cl = Cluster(
            load_config(None, ["--launch.remote=netns", "--partition.num_parts=2", f"--network.dilation={d}"]), 2, "job"
        )
        assert cl.access.cpu_shares is (None if d == "auto" else False)
