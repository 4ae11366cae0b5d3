"""Progress on stderr for long work: shown only on a terminal, never on stdout."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.progress import (
    Progress as RichProgress,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Items per second (records/s for batches)."""

    def __init__(self, unit: str = "records") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:.1f} {self.unit}/s")


class Progress:
    """A context manager; `advance()` per finished item. Quiet when stderr is not a
    terminal or when disabled (`--no-progress`), and for work shorter than a second."""

    def __init__(self, *, enabled: bool = True, total: int | None = None, label: str = "working") -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self.label = label
        self._bar: RichProgress | None = None
        self._task = None
        self._t0 = 0.0
        self._done = 0

    def __enter__(self) -> "Progress":
        self._t0 = time.monotonic()
        return self

    def _start(self) -> None:
        self._bar = RichProgress(*self.columns(), console=Console(stderr=True), transient=True)
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total, completed=self._done)

    def columns(self) -> list[ProgressColumn]:
        """Label, bar, done/total, rate, elapsed, and the ETA when the total is known."""
        cols: list[ProgressColumn] = [
            TextColumn(f"[bold]{self.label}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TimeElapsedColumn(),
        ]
        if self.total is not None:
            cols.append(TimeRemainingColumn())
        return cols

    def advance(self, n: int = 1) -> None:
        self._done += n
        if not self.enabled:
            return
        if self._bar is None and time.monotonic() - self._t0 > 1.0:
            self._start()
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
