"""A hang guard for tests of bounded work: fail, rather than hang, when a call runs away.

Not a benchmark: the bound is generous (machines are shared and slow); it only turns a
runaway (minutes, exponential) into a failure naming what ran away.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


class HangGuardTripped(AssertionError):
    pass


@contextmanager
def hang_guard(seconds: float, what: str = "the call") -> Iterator[None]:
    """Raise HangGuardTripped inside the block if it runs longer than `seconds` (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def trip(signum, frame):
        raise HangGuardTripped(f"{what} ran longer than {seconds} s (hang guard)")

    old = signal.signal(signal.SIGALRM, trip)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
