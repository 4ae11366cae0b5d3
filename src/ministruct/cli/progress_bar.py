"""The Rich columns of progress.py's bar (imported only when a bar is shown)."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
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


def columns(label: str, with_total: bool, unit: str = "records") -> list[ProgressColumn]:
    """Label, bar, done/total, rate, elapsed, and the ETA when the total is known."""
    cols: list[ProgressColumn] = [
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
    ]
    if with_total:
        cols.append(TimeRemainingColumn())  # rich's own estimate: the rate since the bar started
    return cols
