"""A batch's second SIGINT/SIGTERM inside llama.cpp: a batched evaluation in progress
stops at its next graph node instead of running to its end.

Python runs a signal's handler between bytecodes of the main thread, so a signal that
comes during a long `llama_decode` (the prompts of 16 records at once, on a busy
machine: seconds) is handled only when the call returns. But Python's own C-level
handler also writes each signal's number, at once, to the wakeup fd
(`signal.set_wakeup_fd`). While a batch runs (`signal_bytes`), that fd is a file mapped
in memory: its byte k is nonzero from the (k+1)th signal on. llama.cpp's abort callback
reads byte 1 natively, as libc's `strlen` of it (0, or 1 after a second signal: the
callback's bool), with no Python and no GIL, between the nodes of the graph. The
evaluation then returns 2 (aborted), and the handler the batch installed raises.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from typing import Any, Iterator

ABANDON_AT = 1  # the byte that the second signal writes
_SIZE = mmap.PAGESIZE
_lock = threading.Lock()
_state: dict[str, Any] = {}


class Aborted(BaseException):
    """A batched evaluation stopped by a second signal (the batch's handler raises its own
    exception as soon as Python runs it; this one only when it has not yet)."""


def _mapping() -> tuple[Any, mmap.mmap] | None:
    """(the file, its mapping), made once per process; None where there is no libc to
    read it (the abort callback is then not set)."""
    with _lock:
        if "map" not in _state:
            _state["map"] = None
            try:
                strlen = ctypes.cast(ctypes.CDLL(None).strlen, ctypes.c_void_p).value
                f = tempfile.TemporaryFile()
                f.truncate(_SIZE)
                os.set_blocking(f.fileno(), False)  # (set_wakeup_fd wants it; a file never blocks)
                m = mmap.mmap(f.fileno(), _SIZE)
                _state["map"] = (f, m)
                _state["strlen"] = strlen
                _state["byte"] = ctypes.addressof(ctypes.c_char.from_buffer(m, ABANDON_AT))
            except (OSError, AttributeError, TypeError, ValueError):
                pass
        return _state["map"]


def set_abort_callback(lib: Any, ctx: Any) -> None:
    """Let a context's evaluations stop at a batch's second signal (see the module doc)."""
    if _mapping() is None:
        return
    callback = lib.ggml_abort_callback(_state["strlen"])
    _state.setdefault("callbacks", []).append(callback)  # (kept alive as long as any context)
    lib.llama_set_abort_callback(ctx, callback, ctypes.c_void_p(_state["byte"]))


@contextmanager
def signal_bytes() -> Iterator[None]:
    """While the block runs (main thread), signals are counted in the mapped file, so an
    evaluation in progress stops at the second; outside it the byte stays 0."""
    mapped = _mapping() if threading.current_thread() is threading.main_thread() else None
    if mapped is None:
        yield
        return
    f, m = mapped
    m[:] = bytes(_SIZE)
    os.lseek(f.fileno(), 0, os.SEEK_SET)
    try:
        old = signal.set_wakeup_fd(f.fileno())
    except ValueError:  # (not the main interpreter's main thread)
        yield
        return
    try:
        yield
    finally:
        signal.set_wakeup_fd(old)
        m[:] = bytes(_SIZE)


__all__ = ["Aborted", "set_abort_callback", "signal_bytes"]
