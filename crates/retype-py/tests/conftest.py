"""Shared fixtures: the repository, and the command line the module is
checked against (scripts/test builds it; RETYPE_BIN names another)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture(scope="session")
def cli():
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    exe = Path(os.environ.get("RETYPE_BIN", target / "release" / "retype"))
    if not exe.is_file():
        pytest.fail(f"no retype binary at {exe}: run cargo build --release -p retype first")

    def run(*args, check=True):
        p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError(f"retype {' '.join(map(str, args))}: {p.stderr}")
        return p

    def rows(*args):
        return [json.loads(line) for line in run(*args).stdout.splitlines() if line]

    run.rows = rows
    run.exe = exe
    return run
