"""The pytest plugin and retype.mark: under ``retype record -- python3 -m
pytest``, a planted leaky test and a planted greedy one fail with their top
sites in the message while the others pass, each test is a phase of the
trace; without the recorder the plugin and the helper do nothing."""

import json
import subprocess
import sys
import textwrap

import pytest

import retype
from retype import recorder
from retype.pytest_plugin import parse_size

PLANTED = textwrap.dedent(
    """
    import ctypes

    import pytest

    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    kept = []
    MiB = 1 << 20


    @pytest.mark.limit_leaks("1 MB")
    def test_leaky():
        kept.append(libc.malloc(4 * MiB))  # never freed


    @pytest.mark.limit_memory("24 MB")
    def test_greedy():
        blocks = [libc.malloc(10 * MiB) for _ in range(3)]
        for b in blocks:
            libc.free(b)


    @pytest.mark.limit_leaks("1 MB")
    def test_tidy():
        libc.free(libc.malloc(4 * MiB))


    @pytest.mark.limit_memory("24 MB")
    def test_modest():
        for _ in range(3):
            libc.free(libc.malloc(10 * MiB))


    def test_unmarked():
        kept.append(libc.malloc(64 * MiB))
    """
)


def run_pytest(prefix, where):
    (where / "test_planted.py").write_text(PLANTED)
    cmd = [*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_planted.py"]
    return subprocess.run(cmd, cwd=where, capture_output=True, text=True, timeout=600)


def test_sizes_read_as_pytest_memray_reads_them():
    assert parse_size("24 MB") == 24 << 20
    assert parse_size("1MiB") == 1 << 20
    assert parse_size("512 kb") == 512 << 10
    assert parse_size("1.5GB") == 3 << 29
    assert parse_size("100") == parse_size("100 B") == parse_size(100) == 100
    for bad in ["", "MB", "12 parsecs", "-1 MB"]:
        with pytest.raises(ValueError):
            parse_size(bad)


def test_under_the_recorder_the_planted_tests_fail_naming_their_sites(cli, tmp_path):
    trace = tmp_path / "pytest.rtr"
    p = run_pytest([str(cli.exe), "record", "-o", str(trace), "--"], tmp_path)
    out = p.stdout
    # retype record says how the program ended, and fails.
    assert p.returncode != 0 and "exited with exit status: 1" in p.stderr, out + p.stderr
    assert "2 failed, 3 passed" in out, out
    assert "FAILED test_planted.py::test_leaky" in out, out
    assert "FAILED test_planted.py::test_greedy" in out, out
    assert "the test left 4.00 MiB of native allocations live at its end, over its limit_leaks of 1.00 MiB" in out
    assert "the test's native allocations peaked at 30.00 MiB, over its limit_memory of 24.00 MiB" in out
    # The top site, with its frames: the malloc call through ctypes' libffi.
    assert "  1. 4.00 MiB (1 calls, 4.00 MiB allocated, 4.00 MiB live): " in out, out
    assert "  1. 30.00 MiB (3 calls, 30.00 MiB allocated, 0 B live): " in out, out
    assert "ffi" in out, out

    info = json.loads(cli("trace", "info", trace, "--json").stdout)
    names = [ph["name"] for ph in info["phases"]]
    tests = ["test_leaky", "test_greedy", "test_tidy", "test_modest", "test_unmarked"]
    assert names == [f"test_planted.py::{t}" for t in tests]
    leaky = json.loads(cli("trace", "info", trace, "--phase", "test_planted.py::test_leaky", "--json").stdout)
    assert leaky["phase"]["leaked_bytes"] >= 4 << 20
    unmarked = json.loads(
        cli("trace", "info", trace, "--phase", "test_planted.py::test_unmarked", "--json").stdout
    )
    assert unmarked["phase"]["leaked_bytes"] >= 64 << 20


def test_without_the_recorder_the_plugin_and_mark_do_nothing(tmp_path):
    p = run_pytest([], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "5 passed" in p.stdout, p.stdout
    assert not recorder.loaded()
    retype.mark("a phase")
    retype.mark(None)
    assert recorder.phase_stats() is None
