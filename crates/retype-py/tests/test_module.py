"""The module's results are the command line's, key for key."""

import json
import mmap
import subprocess

import pandas as pd
import pytest

import retype

#: Keys that are timings: they differ from run to run.
TIMED = {"mean_ns_per_op", "max_ns_per_op", "kops", "perfidx", "secs"}


def untimed(d):
    return {k: v for k, v in d.items() if k not in TIMED}


@pytest.mark.parametrize(
    "workload,policy,arch",
    [
        ("uniform:seed=3,ops=500,free=30", "best-fit", "riscv32"),
        ("uniform:seed=9,ops=800,free=70", "next-fit:lifted", "riscv32"),
        ("app:mltest", "class-fit", "riscv32"),
        ("seq:2", "first-fit", "riscv32"),
    ],
)
def test_a_study_run_is_the_command_lines(cli, workload, policy, arch):
    [want] = cli.rows("study", "--workload", workload, "--policy", policy, "--arch", arch, "--json")
    got = retype.study(workload, policy, arch=arch)
    assert set(got) == set(want)
    assert untimed(got) == untimed(want)


def test_the_series_is_the_command_lines_csv(cli, tmp_path):
    w = "uniform:seed=5,ops=400,free=48"
    csv = tmp_path / "s.csv"
    cli("study", "--workload", w, "--policy", "worst-fit", "--csv", csv)
    want = pd.read_csv(csv).drop(columns=["workload", "policy", "ns"])
    metrics, got = retype.study(w, "worst-fit", series=True)
    got = got.drop(columns=["ns"])
    assert list(got.columns) == list(want.columns)
    assert len(got) == metrics["ops"]
    pd.testing.assert_frame_equal(
        got.astype({"outcome": str}), want, check_dtype=False
    )


def test_a_replay_is_the_command_lines(cli, root):
    trace = root / "traces" / "malloclab" / "short1-bal.rep"
    [want] = cli.rows("replay", trace, "--heap", "best-fit", "--json", "--min-time-ms", "1")
    got = retype.replay(trace, "best-fit", min_time_ms=1)
    assert set(got) == set(want)
    assert untimed(got) == untimed(want)


def test_a_trace_reads_as_columns_with_its_summary(cli, root):
    trace = root / "traces" / "malloclab" / "short2-bal.rep"
    events, info = retype.read_trace(trace)
    assert info == retype_info(cli, trace)
    n = len(events["op"])
    assert n == sum(info["ops"].values()) and n > 0
    assert all(len(c) == n for c in events.values())
    # An imported trace knows of no descheduled call.
    assert events["descheduled"].dtype == bool and not events["descheduled"].any()
    counts = pd.Series(events["op"]).value_counts().to_dict()
    assert counts == {k: v for k, v in info["ops"].items() if v}


def retype_info(cli, trace):
    import json

    return json.loads(cli("trace", "info", "--json", trace).stdout)


@pytest.mark.parametrize(
    "call",
    [
        lambda: retype.study("uniform:seed=1,ops=10,free=0", "bestest"),
        lambda: retype.study("uniform:seed=1,ops=10,free=0", "best-fit", arch="vax"),
        lambda: retype.study("uniform:seed=1,ops=10,free=0", "all"),
        lambda: retype.replay("/no/such/trace.rep", "best-fit"),
        lambda: retype.read_trace("/no/such/trace.rtr"),
    ],
)
def test_bad_input_raises_the_command_lines_message(call):
    with pytest.raises(retype.Error) as e:
        call()
    assert str(e.value)


def test_messages_are_the_command_lines(cli):
    p = cli("study", "--workload", "uniform:seed=1,ops=10,free=0", "--policy", "best-fit",
            "--arch", "vax", check=False)
    assert p.returncode == 2
    with pytest.raises(retype.Error) as e:
        retype.study("uniform:seed=1,ops=10,free=0", "best-fit", arch="vax")
    assert str(e.value) in p.stderr


def test_a_recordings_rss_samples_and_mapping_calls_are_the_command_lines(cli, root, tmp_path):
    exe = tmp_path / "rss_phases"
    source = root / "crates" / "retype-recorder" / "tests" / "c" / "rss_phases.c"
    subprocess.run(["cc", "-O1", "-g", "-o", exe, source], check=True)
    trace = tmp_path / "p.rtr"
    # The program prints each mapping call it made, one a line.
    made = cli("record", "--rss-ms", "1", "-o", trace, "--", exe).stdout.splitlines()
    events, info, series = retype.read_trace(trace, series=True)
    assert info == retype_info(cli, trace)
    rss, maps = pd.DataFrame(series["rss"]), pd.DataFrame(series["mappings"])
    assert list(rss.columns) == ["time_ns", "rss_bytes", "segment"]
    assert len(rss) == info["rss_samples"] >= 3
    assert rss.rss_bytes.max() == info["rss_max_bytes"]

    # The samples and the calls' times are the timeline's, counted from the
    # first event.
    timeline = json.loads(cli("trace", "timeline", "--json", trace).stdout)
    start = events["time_ns"].min()
    rss = rss.assign(since=rss.time_ns.clip(lower=start) - start).sort_values("since", kind="stable")
    want = [(p["time_ns"], p["rss_bytes"]) for p in timeline["rss"]]
    assert list(zip(rss.since, rss.rss_bytes)) == want
    assert sorted(maps.time_ns - start) == [p["time_ns"] for p in timeline["mapped"]]

    # Each call as the program made it, and nothing else.
    assert maps.op.value_counts().to_dict() == {k: v for k, v in info["mapping_calls"].items() if v}
    def printed(line):
        f = line.split()
        row = {"op": f[0], "addr": 0, "len": 0, "old_addr": 0, "old_len": 0}
        if f[0] in ("mmap", "munmap"):
            row.update(addr=int(f[1], 16), len=int(f[2]))
        elif f[0] == "mremap":
            row.update(old_addr=int(f[1], 16), old_len=int(f[2]), addr=int(f[3], 16), len=int(f[4]))
        else:
            row.update(old_addr=int(f[1], 16), addr=int(f[2], 16))
        return row
    got = maps[["op", "addr", "len", "old_addr", "old_len"]].to_dict("records")
    assert got == [printed(line) for line in made] and len(made) == 6
    first = maps.iloc[0]
    assert first["prot"] == mmap.PROT_READ | mmap.PROT_WRITE
    assert first["flags"] == mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    assert set(maps.thread) <= set(events["thread"])
