"""Sweeps: the grid's cross product, the same rows serially and on Dask,
and a bad grid refused before any task starts."""

import pandas as pd
import pytest

import retype
from retype.sweep import BATCHES_PER_WORKER, local_cluster

GRID = {"study": {"seeds": 25, "ops": 300, "free": [0, 30, 60, 90], "policy": ["best-fit", "next-fit", "first-fit", "worst-fit", "class-fit"]}}


def untimed(frame):
    return frame.drop(columns=["mean_ns_per_op"])


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
