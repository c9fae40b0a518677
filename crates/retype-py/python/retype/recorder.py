"""The recorder's markers API from Python: :func:`mark` starts a named phase
of a recording (``retype record -- python3 ...``), and :func:`phase_stats`
reads the running phase's figures, both through the C functions the
recorder exports (``include/retype.h``). Without the recorder in the
process they do nothing (``phase_stats`` returns None).

The recorder is found as the program's C code finds it, among the symbols
of the process (``dlsym(RTLD_DEFAULT)``: it is preloaded), else among the
loaded objects (``/proc/self/maps``: loaded into the running process by
``retype record --pid``, looked for again at most once a second).

This module imports nothing heavy: the pytest plugin loads it in every
pytest session.
"""

from __future__ import annotations

import ctypes
import os
import time

#: Sites and frames per site in the figures (``RETYPE_TOP_SITES``, ``RETYPE_SITE_FRAMES``).
TOP_SITES = 8
SITE_FRAMES = 8


class _Site(ctypes.Structure):
    _fields_ = [
        ("allocated", ctypes.c_uint64),
        ("calls", ctypes.c_uint64),
        ("live", ctypes.c_uint64),
        ("frames", ctypes.c_uint64 * SITE_FRAMES),
        ("frames_len", ctypes.c_uint32),
    ]


class _Stats(ctypes.Structure):
    _fields_ = [
        ("phase", ctypes.c_uint64),
        ("allocated", ctypes.c_uint64),
        ("calls", ctypes.c_uint64),
        ("live", ctypes.c_uint64),
        ("peak", ctypes.c_uint64),
        ("untracked", ctypes.c_uint64),
        ("active", ctypes.c_uint32),
        ("sites_len", ctypes.c_uint32),
        ("sites", _Site * TOP_SITES),
    ]


class _Recorder:
    """The recorder's two functions, once found."""

    def __init__(self, lib):
        self.mark = lib.retype_mark
        self.mark.argtypes = [ctypes.c_char_p]
        self.mark.restype = None
        self.stats = lib.retype_phase_stats
        self.stats.argtypes = [ctypes.POINTER(_Stats), ctypes.c_int]
        self.stats.restype = ctypes.c_int


_found: _Recorder | None = None
_looked_at = float("-inf")


def _find() -> _Recorder | None:
    try:
        return _Recorder(ctypes.CDLL(None))
    except AttributeError:
        pass
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps if "libretype_recorder" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            return _Recorder(ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_NOW))
        except (OSError, AttributeError):
            continue
    return None


def _recorder() -> _Recorder | None:
    global _found, _looked_at
    if _found is None and time.monotonic() - _looked_at >= 1.0:
        _looked_at = time.monotonic()
        _found = _find()
    return _found


def loaded() -> bool:
    """Whether the recorder is in this process."""
    return _recorder() is not None


def mark(name: str | None) -> None:
    """Starts the phase ``name`` of the recording, ending the one before
    (``None`` or ``""``: ends it without starting another); a no-op without
    the recorder. ``retype trace ... --phase NAME`` analyses one phase."""
    r = _recorder()
    if r is not None:
        r.mark(None if not name else name.encode("utf-8", "replace"))


def phase_stats(by_live: bool = False) -> dict | None:
    """The figures of the phase marked last, counted in the process while it
    runs: ``allocated`` (bytes allocated since the mark, every thread, through
    the malloc family), ``calls``, ``live`` (those blocks' bytes still live),
    ``peak`` (the highest ``live``), ``untracked`` (blocks the recorder had no
    room to follow), ``active``, ``phase`` (the mark's number), and ``sites``:
    the top call stacks by live bytes (``by_live``) or by bytes allocated,
    each a dict with ``allocated``, ``calls``, ``live`` and ``frames`` (return
    addresses, the allocator's caller first). None without the recorder, or
    while it records nothing."""
    r = _recorder()
    if r is None:
        return None
    s = _Stats()
    if r.stats(ctypes.byref(s), int(by_live)) != 0:
        return None
    sites = [
        {
            "allocated": site.allocated,
            "calls": site.calls,
            "live": site.live,
            "frames": list(site.frames[: site.frames_len]),
        }
        for site in s.sites[: s.sites_len]
    ]
    keys = ("phase", "allocated", "calls", "live", "peak", "untracked")
    return {**{k: getattr(s, k) for k in keys}, "active": bool(s.active), "sites": sites}


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def frame_name(address: int) -> str:
    """A return address as ``function+0xOFF (object)`` from the dynamic
    symbols (``dladdr``), else ``0xADDRESS (object+0xOFF)``: cheap, in the
    process, without debug information."""
    info = _DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    # The call instruction is just before the return address.
    if address == 0 or not dladdr(ctypes.c_void_p(address - 1), ctypes.byref(info)):
        return hex(address)
    obj = os.path.basename(info.dli_fname.decode(errors="replace")) if info.dli_fname else "?"
    if info.dli_sname and info.dli_saddr:
        return f"{info.dli_sname.decode(errors='replace')}+{address - info.dli_saddr:#x} ({obj})"
    return f"{address:#x} ({obj}+{address - (info.dli_fbase or 0):#x})"
