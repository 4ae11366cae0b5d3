"""A hang guard for tests of bounded work: fail, rather than hang, when a call runs away.

Not a benchmark: the bound is generous, and it counts the process's own CPU time, not
the clock's: on a busy machine (CI, other jobs) a call waits for a core without spending
its bound. It only turns a runaway (minutes, exponential) into a failure naming what ran
away. A block that waits (a pipe, a signal) spends no CPU time: `waiting=True` bounds it
by the clock instead.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


class HangGuardTripped(AssertionError):
    pass


@contextmanager
def hang_guard(seconds: float, what: str = "the call", *, waiting: bool = False) -> Iterator[None]:
    """Raise HangGuardTripped inside the block if it spends more than `seconds` of CPU time
    (of the clock's time, with `waiting`). Main thread only (elsewhere it guards nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    timer, signum = (signal.ITIMER_REAL, signal.SIGALRM) if waiting else (signal.ITIMER_PROF, signal.SIGPROF)

    def trip(signum, frame):
        raise HangGuardTripped(f"{what} ran longer than {seconds} s (hang guard)")

    old = signal.signal(signum, trip)
    signal.setitimer(timer, seconds)
    try:
        yield
    finally:
        signal.setitimer(timer, 0)
        signal.signal(signum, old)
