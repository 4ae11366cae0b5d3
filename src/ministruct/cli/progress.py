"""Progress on stderr for long work: shown only on a terminal, never on stdout (Rich is
imported only when a bar is drawn)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """A context manager; `advance()` per finished item. Quiet when disabled
    (`--no-progress`) and for work shorter than a second. On a terminal a bar; elsewhere,
    with `plain_every` seconds, a line now and then (done/total, elapsed, ETA)."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        total: int | None = None,
        label: str = "working",
        plain_every: float | None = None,
        unit: str = "records",
    ) -> None:
        """`unit`: what an item is, for the rate (records/s, tokens/s, ...)."""
        tty = sys.stderr.isatty()
        self.enabled = enabled and tty
        self.plain_every = plain_every if enabled and not tty else None
        self.total = total
        self.label = label
        self.unit = unit
        self._bar: RichProgress | None = None
        self._task = None
        self._t0 = 0.0
        self._done = 0
        self._first = 0  # items already done when the work started (a resumed study)
        self._last_line = 0.0

    def start_at(self, done: int) -> None:
        """Items done before this run (not counted in the rate or the ETA)."""
        self._done = self._first = done

    def __enter__(self) -> "Progress":
        self._t0 = time.monotonic()
        return self

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(*self.columns(), console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, completed=self._done)

    def columns(self) -> list[Any]:
        """The bar's Rich columns (progress_bar.columns): Rich loads only when a bar is shown."""
        from ministruct.cli.progress_bar import columns

        return columns(self.label, self.total is not None, self.unit)

    def eta(self) -> float | None:
        """Seconds left at this run's rate (None before the first item or without a total)."""
        ran = self._done - self._first
        if self.total is None or ran <= 0:
            return None
        return (time.monotonic() - self._t0) / ran * (self.total - self._done)

    def _plain(self) -> None:
        now = time.monotonic()
        if now - self._last_line < (self.plain_every or 0) and self._done != self.total:
            return
        self._last_line = now
        eta = self.eta()
        total = "" if self.total is None else f"/{self.total}"
        left = "" if eta is None else f", ETA {_clock(eta)}"
        print(f"{self.label}: {self._done}{total}, elapsed {_clock(now - self._t0)}{left}", file=sys.stderr, flush=True)

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self.plain_every is not None:
            self._plain()
        if not self.enabled:
            return
        if self._bar is None and time.monotonic() - self._t0 > 1.0:
            self._start()
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
