"""Batch progress: records/s and an ETA, on stderr only when it is a terminal."""

from __future__ import annotations

import io

from rich.progress import Progress as RichProgress
from rich.progress import TimeRemainingColumn

from ministruct.cli.progress import Progress
from ministruct.cli.progress_bar import RateColumn


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_quiet_unless_stderr_is_a_terminal(monkeypatch):
    for tty in (False, True):
        monkeypatch.setattr("sys.stderr", _Tty(tty))
        assert Progress(total=10).enabled is tty
        assert Progress(total=10, enabled=False).enabled is False


def test_rate_and_eta_columns():
    cols = Progress(total=100, label="generating").columns()
    assert any(isinstance(c, RateColumn) for c in cols) and any(isinstance(c, TimeRemainingColumn) for c in cols)
    assert not any(isinstance(c, TimeRemainingColumn) for c in Progress(total=None).columns())  # stdin: no total
    now = [0.0]
    bar = RichProgress(RateColumn(), auto_refresh=False, get_time=lambda: now[0])
    task_id = bar.add_task("x", total=10)
    assert str(RateColumn().render(bar.tasks[0])) == ""
    for t in (1.0, 2.0, 3.0):
        now[0] = t
        bar.advance(task_id, 2)
    assert str(RateColumn().render(bar.tasks[0])) == "2.0 records/s"


def test_the_rate_names_what_is_counted():
    # issue 52: inspect's progress counted tokens as "records/s"
    rates = [c for c in Progress(total=10, label="generating", unit="tokens").columns() if isinstance(c, RateColumn)]
    assert [c.unit for c in rates] == ["tokens"]
    import ast
    from pathlib import Path

    cli = Path(__file__).resolve().parents[2] / "src" / "ministruct" / "cli"
    for name, unit in (("inspect.py", "tokens"), ("collapse.py", "generations")):
        calls = [
            n
            for n in ast.walk(ast.parse((cli / name).read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Progress"
        ]
        assert calls and all(any(k.arg == "unit" for k in c.keywords) for c in calls), name
        assert any(any(k.arg == "unit" and k.value.value == unit for k in c.keywords) for c in calls), name
