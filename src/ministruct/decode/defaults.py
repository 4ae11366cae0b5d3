"""Decoding defaults the command line shows in its help, and their check (a leaf: importing
it loads nothing but errors.py)."""

import os
import time

from ministruct.errors import UsageError

DEFAULT_PARALLEL = 16  # the best of 1, 4, 8, 16 in benchmarks/throughput.py on the project machine (docs/batches.md)


def checked_parallel(parallel: object) -> int:
    """`parallel` when it is an integer >= 1 (generations decoded at once); else UsageError."""
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise UsageError(f"parallel must be an integer >= 1, got {parallel!r}", parameter="parallel")
    return parallel


class OtherWork:
    """How busy other processes keep this machine's cores from now on: their CPU time
    (Linux's /proc/stat less this process's own, niced work left out) over the time
    since it was made."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._machine0 = _machine_busy()
        self._own0 = _own_cpu()

    def free_cores(self) -> int:
        """The cores other work leaves free, rounded, at least 1 (llama.cpp's threads wait
        for each other at every layer, so a thread whose core another process holds stalls
        them all). Where /proc/stat cannot be read, or too little time has passed: the
        1-minute load average's reading."""
        cores = os.cpu_count() or 1
        machine, elapsed = _machine_busy(), time.monotonic() - self._t0
        if machine is None or self._machine0 is None or elapsed < 0.1:
            try:
                busy = os.getloadavg()[0]
            except OSError:  # no load average on this system
                return max(1, cores // 2)
        else:
            busy = max(0.0, (machine - self._machine0) - (_own_cpu() - self._own0)) / elapsed
        return max(1, min(cores, round(cores - busy)))


def _machine_busy() -> float | None:
    """CPU seconds every core has spent on un-niced work since boot (None off Linux)."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != b"cpu" or len(fields) < 8:
        return None
    user, _nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
    steal = int(fields[8]) if len(fields) > 8 else 0
    return (user + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system
