"""Sweeps: the grid's cross product, the same rows serially and on Dask,
a bad grid refused before any task starts, a failing run named without
losing the other rows, a killed worker's task run again, and a sweep from
every place a user starts one."""

import os
import subprocess
import sys

import pandas as pd
import pytest

import retype
from retype.sweep import BATCHES_PER_WORKER, local_cluster

GRID = {"study": {"seeds": 25, "ops": 300, "free": [0, 30, 60, 90], "policy": ["best-fit", "next-fit", "first-fit", "worst-fit", "class-fit"]}}


def untimed(frame):
    return frame.drop(columns=["mean_ns_per_op", "max_ns_per_op"])


def test_the_grid_is_the_cross_product():
    rows = retype.sweep({"study": {"seeds": 2, "ops": 100, "free": [0, 50], "policy": "all"}},
                        client="serial")
    policies = len(retype._native.policies("all"))
    assert len(rows) == 2 * 2 * policies
    assert not rows.duplicated(["seed", "free", "policy"]).any()
    one = rows.iloc[0]
    assert one["workload"] == f"uniform:seed={one.seed},ops=100,free={one.free}"
    assert (rows["policy"] == rows["policy"].astype(str)).all()


def test_a_local_cluster_gives_the_serial_rows():
    serial = retype.sweep(GRID, client="serial")
    assert len(serial) == 500
    local = retype.sweep(GRID, workers=2)
    pd.testing.assert_frame_equal(untimed(local), untimed(serial))


def test_a_given_client_runs_the_batches_as_tasks():
    from distributed import Client, get_task_stream

    with local_cluster(2) as cluster:
        with Client(cluster) as client:
            with get_task_stream(client) as stream:
                rows = retype.sweep(GRID, client=client)
    pd.testing.assert_frame_equal(untimed(rows), untimed(retype.sweep(GRID, client="serial")))
    assert len(stream.data) == 2 * BATCHES_PER_WORKER
    with local_cluster(2) as cluster:
        with Client(cluster) as client:
            with get_task_stream(client) as stream:
                rows = retype.sweep(GRID, client=client, batch=100)
    assert len(stream.data) == 5
    pd.testing.assert_frame_equal(untimed(rows), untimed(retype.sweep(GRID, client="serial")))


class NoTasks:
    """A client that fails the test if a task reaches it."""

    def scheduler_info(self):
        return {"workers": {"w": {}}}

    def map(self, *a, **k):
        raise AssertionError("a task started")


@pytest.mark.parametrize(
    "grid,words",
    [
        ({"study": {"policy": ["best-fit", "bestest"]}}, "unknown policy"),
        ({"study": {"seeds": -1}}, "seeds must be"),
        ({"study": {"seed": [1, -2]}}, "a seed is"),
        ({"study": {"arch": ["riscv32", "vax"]}}, "unknown architecture"),
        ({"study": {"polcy": "best-fit"}}, "unknown key"),
        ({"replay": {"trace": ["/no/such.rep"]}}, "no such file"),
        ({"study": {}, "replay": {}}, "one table"),
        ({"study": 5}, "a table of keys"),
    ],
)
def test_a_bad_grid_is_refused_before_any_task(grid, words):
    with pytest.raises(retype.Error, match=words):
        retype.sweep(grid, client=NoTasks())


def test_a_bad_batch_is_refused():
    with pytest.raises(retype.Error, match="batch is"):
        retype.sweep(GRID, client=NoTasks(), batch=0)


def test_the_command_line_writes_parquet(cli, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[study]\nseeds = 3\nops = 200\nfree = [10, 80]\npolicy = "best-fit"\n')
    out = tmp_path / "rows.parquet"
    p = cli("sweep", grid, "-o", out, "--serial")
    assert "6 runs" in p.stdout
    rows = pd.read_parquet(out)
    want = retype.sweep(grid, client="serial")
    pd.testing.assert_frame_equal(untimed(rows), untimed(want))
    bad = tmp_path / "bad.toml"
    bad.write_text("[study]\nseeds = -4\n")
    p = cli("sweep", bad, "-o", out, check=False)
    assert p.returncode == 2 and "seeds must be" in p.stderr


SMALL = '{"study": {"seeds": 3, "ops": 100, "free": [0, 50], "policy": "best-fit"}}'
# The docs' example as a user pastes it: no `if __name__ == "__main__"` guard.
SCRIPT = f"import retype\nrows = retype.sweep({SMALL}, workers=2)\nprint('rows', len(rows))\n"


@pytest.mark.parametrize("entry", ["script", "-c", "stdin", "ipython"])
def test_a_sweep_runs_from_every_entry_point(entry, tmp_path):
    script = tmp_path / "sweep_here.py"
    script.write_text(SCRIPT)
    args, stdin = {
        "script": ([sys.executable, str(script)], None),
        "-c": ([sys.executable, "-c", SCRIPT], None),
        "stdin": ([sys.executable, "-"], SCRIPT),
        # IPython's shell is what a notebook's kernel runs the cells in.
        "ipython": ([sys.executable, "-m", "IPython", "--quick", "--no-banner", "-c", SCRIPT], None),
    }[entry]
    if entry == "ipython":
        pytest.importorskip("IPython", reason="scripts/install-py installs IPython")
    p = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "rows 6" in p.stdout, p.stdout + p.stderr[-3000:]


def replay_grid(root, tmp_path):
    bad = tmp_path / "bad.rep"
    bad.write_text("0\n1\n2\n1\na 0 8\nf 1\n")  # exists, so the grid passes; fails at line 6
    good = root / "traces" / "malloclab" / "short1-bal.rep"
    return {"replay": {"trace": [str(good), str(bad)], "heap": "best-fit,first-fit", "min_time_ms": 0}}, good, bad


@pytest.mark.parametrize("client", ["serial", None])
def test_a_failing_run_is_named_and_loses_no_other_row(client, root, tmp_path):
    grid, good, bad = replay_grid(root, tmp_path)
    with pytest.raises(retype.SweepError) as e:
        retype.sweep(grid, client=client, workers=2)
    message = str(e.value)
    assert message.startswith("2 of 4 runs failed"), message
    assert f"trace={bad}, heap=best-fit" in message and f"{bad}:6:" in message, message
    rows = e.value.rows
    assert len(rows) == 4
    ok = rows[rows["trace"] == str(good)]
    assert ok["error"].isna().all() and (ok["util"] > 0).all()
    failed = rows[rows["trace"] == str(bad)]
    assert failed["error"].str.contains("out of range").all() and failed["util"].isna().all()


def test_the_command_line_writes_the_rows_of_a_sweep_with_failures(cli, root, tmp_path):
    grid, good, bad = replay_grid(root, tmp_path)
    toml = tmp_path / "grid.toml"
    toml.write_text(
        f'[replay]\ntrace = ["{good}", "{bad}"]\nheap = "best-fit"\nmin_time_ms = 0\n'
    )
    out = tmp_path / "rows.csv"
    p = cli("sweep", toml, "-o", out, "--serial", check=False)
    assert p.returncode == 1 and f"trace={bad}" in p.stderr, p.stderr
    rows = pd.read_csv(out)
    assert len(rows) == 2 and rows["error"].isna().sum() == 1


def kill_first_task(mark):
    """A worker plugin that kills its worker process when a task first starts
    executing anywhere in the cluster (a file marks that it happened)."""
    from distributed import WorkerPlugin

    class KillFirstTask(WorkerPlugin):
        def transition(self, key, start, finish, **kwargs):
            if finish == "executing":
                try:
                    fd = os.open(str(mark), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return
                os.close(fd)
                os._exit(9)

    return KillFirstTask()


def test_a_worker_killed_mid_sweep_loses_no_row(tmp_path):
    from distributed import Client

    mark = tmp_path / "killed"
    with local_cluster(2) as cluster:
        with Client(cluster) as client:
            client.register_plugin(kill_first_task(mark), name="kill-first-task")
            rows = retype.sweep(GRID, client=client)
    assert mark.exists(), "no worker was killed"
    pd.testing.assert_frame_equal(untimed(rows), untimed(retype.sweep(GRID, client="serial")))
