"""The pytest plugin (entry point ``pytest11``): under ``retype record --
python3 -m pytest ...`` each test's call is a phase of the recording, named
by its node id, and two markers put limits on its native memory:

    @pytest.mark.limit_memory("24 MB")   # the peak of what the test allocated
    @pytest.mark.limit_leaks("1 MB")     # what it left allocated at its end

Both count every block the test allocated through the malloc family (any
thread, any library, Python's own large objects), from the start of the test
function's call to its return, as the recorder follows them in the process
(``retype.recorder.phase_stats``): ``limit_memory`` holds the highest sum of
those blocks live at once (pytest-memray's high-water mark, for native
memory); ``limit_leaks`` the bytes of those blocks still allocated when the
call returned, after a garbage collection. Blocks allocated before the test
and freed in it count nowhere. Python keeps some memory in caches of its own
(free lists, interned strings, a code object's first run): it is allocated
during the test and not freed, so give ``limit_leaks`` a margin over zero.
Sizes read as pytest-memray reads them: B, KB, MB, GB (powers of 1024; KiB,
MiB, GiB too). A test over a limit fails, its message naming its top sites.

Without the recorder in the process the plugin does nothing (the markers
are known, and not checked).
"""

from __future__ import annotations

import gc
import re

import pytest

from . import recorder

_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text) -> int:
    """``"24 MB"``, ``"512KiB"``, ``"1.5 GB"``, ``"100"`` or a number, in bytes."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"{text!r} is not a size: a number with B, KB, MB or GB (as '24 MB')")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _limit(item, name):
    marker = item.get_closest_marker(name)
    if marker is None:
        return None
    if len(marker.args) != 1:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} takes one size, as {name}('24 MB')")
    return parse_size(marker.args[0])


def _sites_text(stats, figure) -> str:
    lines = []
    for k, site in enumerate(stats["sites"], 1):
        frames = " < ".join(recorder.frame_name(a) for a in site["frames"][:4]) or "(no stack)"
        lines.append(
            f"  {k}. {_size(site[figure])} ({site['calls']} calls, "
            f"{_size(site['allocated'])} allocated, {_size(site['live'])} live): {frames}"
        )
    return "\n".join(lines)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "limit_memory(size): under retype record, fail the test if the native memory it "
        "allocated peaks above size (as '24 MB')",
    )
    config.addinivalue_line(
        "markers",
        "limit_leaks(size): under retype record, fail the test if it leaves more than size "
        "of native memory allocated at its end (as '1 MB')",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not recorder.loaded():
        return (yield)
    memory, leaks = _limit(item, "limit_memory"), _limit(item, "limit_leaks")
    recorder.mark(item.nodeid)
    try:
        result = yield
        if leaks is not None:
            gc.collect()
        failures = []
        if memory is not None:
            s = recorder.phase_stats(by_live=False)
            if s is not None and s["peak"] > memory:
                failures.append(
                    f"the test's native allocations peaked at {_size(s['peak'])}, over its "
                    f"limit_memory of {_size(memory)}; its top sites by bytes allocated:\n"
                    + _sites_text(s, "allocated")
                )
        if leaks is not None:
            s = recorder.phase_stats(by_live=True)
            if s is not None and s["live"] > leaks:
                failures.append(
                    f"the test left {_size(s['live'])} of native allocations live at its end, "
                    f"over its limit_leaks of {_size(leaks)}; its top sites by bytes left live:\n"
                    + _sites_text(s, "live")
                )
        if failures:
            pytest.fail("retype: " + "\nretype: ".join(failures), pytrace=False)
        return result
    finally:
        recorder.mark(None)
