"""Batch runs over input records, as `gen --input` and `check --input` do them.

The machinery both commands share: per-record settings (validated here), a constraint
cache keyed by content (a batch of 10,000 records over 3 schemas loads 3 constraints),
counts of ok / incomplete / failed results with the exit status they imply, `--resume`
(the results already written are matched to the records in order, per id, and those
records skipped; a line cut off at OUT's end is dropped first when stdout appends to OUT),
and SIGINT/SIGTERM handling (the record in flight finishes, every finished record is
written, the exit status is 130/143).

    tally = run_batch(records, process, labels=GEN_LABELS, resume=Resume.load(path))
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import signal
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Generic, Iterable, Iterator, Protocol, TypeVar

from ministruct.decode.interrupt import Aborted, signal_bytes
from ministruct.errors import InputError, MinistructError
from ministruct.grammar.constraint import Constraint, load_constraint
from ministruct.jobs.records import InputRecord, json_type, split_lines, write_line

T = TypeVar("T")
CONSTRAINT_FIELDS = ("schema", "grammar", "lark", "regex", "choice", "tools")
TOOL_FIELDS = ("tools", "tool_choice")  # a record's tools constraint: its own tools, or the command's with its choice
CONSTRAINT_KINDS = CONSTRAINT_FIELDS  # the load_constraint parameters that pick the constraint
GEN_SETTINGS = (
    *CONSTRAINT_FIELDS,
    "tool_choice",
    "seed",
    "max_tokens",
    "temperature",
    "top_p",
    "system",
    "think",
    "think_tokens",
)
CHECK_SETTINGS = (*CONSTRAINT_FIELDS, "tool_choice")
GEN_LABELS = ("ok", "incomplete", "failed")
CHECK_LABELS = ("accepted", "rejected", "failed")


# ---------------------------------------------------------------- per-record settings


def settings_error(settings: dict[str, Any]) -> str | None:
    """What is wrong with a record's settings (None when they are usable)."""
    kinds = [k for k in CONSTRAINT_FIELDS if k in settings]
    if "tool_choice" in settings and "tools" not in kinds:
        kinds.append("tool_choice")
    if len(kinds) > 1:
        return f"give at most one constraint per record, not {' and '.join(kinds)}"
    for k in ("schema", "grammar", "lark", "regex", "system"):
        if k in settings and not isinstance(settings[k], str) and not (k == "system" and settings[k] is None):
            return f'"{k}" must be a string, not {json_type(settings[k])}'
    for k in ("schema", "lark", "tools"):
        if settings.get(k) == "-":
            return f'"{k}": "-" (stdin) is for the command line; a record names a file'
    if "tools" in settings and not isinstance(settings["tools"], (str, list)):
        return f'"tools" must be an array of tools or a file name, not {json_type(settings["tools"])}'
    if "tool_choice" in settings and not isinstance(settings["tool_choice"], (str, dict)):
        return '"tool_choice" must be auto, required, none, a tool\'s name or {"type": "function", ...}'
    if "choice" in settings:
        ch = settings["choice"]
        if not isinstance(ch, list) or not ch or not all(isinstance(x, str) for x in ch):
            return '"choice" must be a non-empty array of strings'
    if "think" in settings and not isinstance(settings["think"], bool):
        return f'"think" must be true or false, not {json.dumps(settings["think"])}'
    if settings.get("think") is False and settings.get("think_tokens") is not None:
        return '"think_tokens" needs "think" (it is false)'
    for k, lo in (("seed", 0), ("max_tokens", 1), ("think_tokens", 0)):
        if k in settings:
            v = settings[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                return f'"{k}" must be an integer >= {lo}, not {json.dumps(v)}'
    if "temperature" in settings and not _number(settings["temperature"], lambda x: x >= 0):
        return f'"temperature" must be a number >= 0, not {json.dumps(settings["temperature"])}'
    if "top_p" in settings and not _number(settings["top_p"], lambda x: 0 < x <= 1):
        return f'"top_p" must be a number in (0, 1], not {json.dumps(settings["top_p"])}'
    return None


def _number(v: Any, ok: Callable[[float], bool]) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and ok(v)


def validated(records: Iterable[InputRecord]) -> Iterator[InputRecord]:
    """The records, with an error set on those whose settings are unusable."""
    for rec in records:
        if rec.error is None and rec.settings:
            err = settings_error(rec.settings)
            if err is not None:
                rec.error = f"{rec.where or rec.index}: {err}"
        yield rec


def record_constraint(settings: dict[str, Any]) -> tuple[str, Any] | None:
    """(kind, value) of the record's own constraint, or None to use the command's. A tools
    constraint's value is `{"tools": ..., "tool_choice": ...}` with the fields the record gives."""
    if any(k in settings for k in TOOL_FIELDS):
        return "tools", {k: settings[k] for k in TOOL_FIELDS if k in settings}
    for k in CONSTRAINT_FIELDS:
        if k in settings:
            return k, settings[k]
    return None


def with_constraint(flags: T, kind: str, value: Any) -> T:
    """A copy of a constraint-flags dataclass (cli.constraint_options.ConstraintFlags) naming only the
    record's constraint; every other option (whitespace, lenient, ...) is kept, and `root`
    only for a grammar."""
    blank: dict[str, Any] = {k: None for k in CONSTRAINT_KINDS if hasattr(flags, k)}
    if kind != "grammar" and hasattr(flags, "root"):
        blank["root"] = None
    if kind == "tools":
        own = {"tools": value.get("tools", getattr(flags, "tools", None))}
        if "tool_choice" in value:
            own["tool_choice"] = value["tool_choice"]
        if own["tools"] is None:
            raise InputError('"tool_choice" needs "tools" in the record or --tools')
        return dataclasses.replace(flags, **{**blank, **own})  # type: ignore[type-var]
    if hasattr(flags, "tool_choice"):
        blank.update(tool_choice=None, parallel_tool_calls=False, tool_format="auto")
    return dataclasses.replace(flags, **{**blank, kind: value})  # type: ignore[type-var]


class ConstraintCache(Generic[T]):
    """What a record's own constraint loads to, once per distinct content.

    `load(kind, value)` builds it (for gen: `with_constraint(flags, kind, value).load()`,
    which goes through load_constraint, so every option of the command applies).
    Failures are remembered too, so a bad schema is refused once per batch.
    """

    def __init__(self, load: Callable[[str, Any], T], *, on_load: Callable[[T], None] | None = None) -> None:
        self.loads = 0
        self._load = load
        self._on_load = on_load
        self._memo: dict[tuple, Any] = {}

    @classmethod
    def of_options(cls, options: dict[str, Any], **kw: Any) -> ConstraintCache[Constraint]:
        """A cache loading with `load_constraint(**options, kind=value)` (the library's way)."""
        base = {k: v for k, v in options.items() if k not in CONSTRAINT_KINDS}

        def load(kind: str, value: Any) -> Constraint:
            opts = {k: v for k, v in base.items() if k != "root" or kind == "grammar"}
            if kind != "tools":
                opts = {k: v for k, v in opts.items() if k not in ("tool_choice", "parallel_tool_calls", "tool_format")}
                return load_constraint(**opts, **{kind: value})
            tools = value.get("tools", options.get("tools"))
            if tools is None:
                raise InputError('"tool_choice" needs "tools" in the record or the batch\'s tools')
            opts.update({k: v for k, v in value.items() if k != "tools"})
            return load_constraint(**opts, tools=tools)

        return cls(load, **kw)  # type: ignore[return-value]

    def get(self, kind: str, value: Any) -> T:
        """What `load(kind, value)` gives for one record's constraint (its error, raised again)."""
        key = self._key(kind, value)
        if key not in self._memo:
            self.loads += 1
            try:
                got: Any = self._load(kind, value)
            except MinistructError as e:
                got = e
            except RecursionError:
                got = InputError(f"{value if kind != 'regex' else '<regex>'}: the {kind} nests too deeply")
            self._memo[key] = got
            if not isinstance(got, MinistructError) and self._on_load is not None:
                self._on_load(got)
        got = self._memo[key]
        if isinstance(got, MinistructError):
            raise got
        return got

    @staticmethod
    def _key(kind: str, value: Any) -> tuple:
        if kind == "choice":
            return (kind, tuple(value))
        if kind == "tools":
            return (kind, json.dumps(value, sort_keys=True))
        if kind in ("schema", "grammar", "lark"):
            p = Path(value)
            try:
                if p.is_file():
                    return (kind, value, hashlib.sha256(p.read_bytes()).hexdigest())
            except OSError:
                pass
        return (kind, value)


# ---------------------------------------------------------------- counts, resume, signals


@dataclass
class Tally:
    """Counts of results by status; the summary line and the exit status they imply."""

    labels: tuple[str, str, str] = GEN_LABELS
    counts: Counter = field(default_factory=Counter)
    skipped: int = 0

    def add(self, status: str) -> None:
        if status not in self.labels:
            raise ValueError(f"unknown status {status!r}")
        self.counts[status] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def exit_code(self) -> int:
        """0 when every result is the first label (ok / accepted), else 1."""
        return 0 if self.total == self.counts[self.labels[0]] else 1

    def line(self) -> str:
        parts = ", ".join(f"{self.counts[k]} {k}" for k in self.labels)
        s = "" if self.total == 1 else "s"
        text = f"{self.total} result{s}: {parts}"
        if self.skipped:
            text += f"; {self.skipped} skipped (already in the --resume file)"
        return text


class Resume:
    """The ids already present in an output file, with how many results each has; each
    record takes its results in input order (`take`), so a record whose results are not
    in the file runs, whatever other record has its id."""

    def __init__(self, done: Counter | None = None, *, path: str | None = None, cut_off: int | None = None) -> None:
        self.done = done if done is not None else Counter()
        self.path = path
        # where OUT's last whole line ends, when a line is cut after it (the run that wrote
        # it was killed, or the disk was full, mid-write); None when OUT ends with a newline
        self.cut_off = cut_off

    @classmethod
    def load(cls, path: str | None) -> Resume:
        """Read OUT (a missing file is an empty one); lines that are not records are ignored."""
        done: Counter = Counter()
        if path is None:
            return cls(done)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            return cls(done)
        except OSError as e:
            raise InputError(f"{path}: cannot read the --resume file: {e.strerror or e}") from None
        with f:
            for _, line, _ in split_lines(f):
                try:
                    obj = json.loads(line) if line else None
                except (ValueError, RecursionError):
                    continue
                if isinstance(obj, dict) and "id" in obj:
                    done[_id_key(obj["id"])] += 1
            return cls(done, path=path, cut_off=_whole_lines_end(f))

    def drop_cut_line(self, stream: IO[str] | None = None) -> None:
        """When OUT ends inside a line and `stream` (stdout) appends to OUT (`>> OUT`), cut
        that line off, so OUT holds whole records only (the cut line's record is not in
        `done`: it runs again, in its place at the end); where OUT cannot be truncated,
        end the line instead, so the next record starts a line of its own."""
        out = stream or sys.stdout
        if self.cut_off is None or self.path is None:
            return
        try:
            here, there = os.fstat(out.fileno()), os.stat(self.path)
        except (OSError, ValueError, AttributeError):  # not a real file (tests' runners)
            return
        if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            return
        try:
            out.flush()
            os.ftruncate(out.fileno(), self.cut_off)
        except OSError:
            write_line("", out)

    def take(self, rid: Any, most: int) -> int:
        """How many results of the record with id `rid` are already written (at most
        `most`, its share); they are used up, so the next record with that id (a
        duplicate's error line) gets the ones after them."""
        key = _id_key(rid)
        n = min(self.done.get(key, 0), most)
        if n:
            self.done[key] -= n
        return n


def _whole_lines_end(f: IO[bytes]) -> int | None:
    """The offset just past the last newline of `f`, when bytes follow it (else None)."""
    end = size = f.seek(0, os.SEEK_END)
    if size == 0:
        return None
    f.seek(size - 1)
    if f.read(1) == b"\n":
        return None
    while end > 0:
        start = max(0, end - (1 << 16))
        f.seek(start)
        at = f.read(end - start).rfind(b"\n")
        if at >= 0:
            return start + at + 1
        end = start
    return 0


def _id_key(rid: Any) -> str:
    return json.dumps(rid, sort_keys=True, ensure_ascii=False)


class Abandoned(BaseException):
    """A second SIGINT/SIGTERM: the record in flight is given up."""


class _StopReading(BaseException):
    """A signal while the batch waited for its next input line: no more lines are read."""


class Interrupts:
    """SIGINT/SIGTERM while a batch runs: the first lets the record in flight finish, then
    the batch stops (`exit_code` 130/143); a second abandons the record in flight. While
    the batch only waits for its next line (stdin at a terminal, a slow pipe), the first
    stops the reading at once."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.reading = False  # waiting for the next input line
        self._old: dict[int, Any] = {}
        self._counted: Any = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for s in self.SIGNALS:
                self._old[s] = signal.signal(s, self._handle)
            self._counted = signal_bytes()  # (a second signal also stops a batched evaluation in progress)
            self._counted.__enter__()
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise Abandoned()
        self.signum = signum
        if self.reading:
            raise _StopReading()

    def __exit__(self, *exc: Any) -> None:
        if self._counted is not None:
            self._counted.__exit__(None, None, None)
        for s, old in self._old.items():
            signal.signal(s, old)

    @property
    def exit_code(self) -> int | None:
        return None if self.signum is None else 128 + self.signum

    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


# ---------------------------------------------------------------- the loop


class Advance(Protocol):
    def advance(self, n: int = 1) -> None: ...


Process = Callable[[InputRecord, int], Iterable[str]]
"""`process(record, already_done)` writes a record's results and yields one status per
result. A process with `parallel` > 1 and a `many(todo)` method runs the whole loop
instead: (record, already done) pairs in, (record, statuses) out in input order."""


def run_batch(
    records: Iterable[InputRecord],
    process: Process,
    *,
    labels: tuple[str, str, str] = GEN_LABELS,
    resume: Resume | None = None,
    per_record: int = 1,
    progress: Advance | None = None,
    report: Callable[[str], None] | None = None,
) -> int:
    """Run `process(record, already_done)` for each record in order (or `process.many`,
    see Process); it writes its results and yields one status (a label) per result.
    Returns the exit status: 0 all ok, 1 any not, 130/143 after SIGINT/SIGTERM. `report` receives the summary line."""
    tally = Tally(labels)
    resume = resume or Resume()
    resume.drop_cut_line()
    with Interrupts() as intr:
        # (a record in error writes one line, whatever --n)
        todo = ((rec, resume.take(rec.id, 1 if rec.error else per_record)) for rec in _until_stopped(records, intr))
        many = getattr(process, "many", None) if getattr(process, "parallel", 1) > 1 else None
        results = many(todo) if many is not None else _one_by_one(process, todo, per_record)
        try:
            for rec, statuses in results:
                produced = 0
                for status in statuses:
                    tally.add(status)
                    produced += 1
                    if intr.signum is not None and many is None:
                        break  # one at a time: the record's other results are not started
                if not produced:
                    tally.skipped += 1
                if progress is not None:
                    progress.advance()
        except (Abandoned, Aborted, _StopReading):  # _StopReading: the signal came as the wait for a line ended
            pass
    if report is not None:
        stopped = f"; stopped by {intr.name()}" if intr.signum is not None else ""
        report(tally.line() + stopped)
    return intr.exit_code or tally.exit_code()


def _until_stopped(records: Iterable[InputRecord], intr: Interrupts) -> Iterator[InputRecord]:
    """The records, until a signal asks the batch to stop (what is in flight finishes; a
    wait for the next line ends at once)."""
    it = iter(records)
    while intr.signum is None:
        intr.reading = True
        try:
            rec = next(it)
        except (StopIteration, _StopReading):
            return
        finally:
            intr.reading = False
        if intr.signum is not None:
            return
        yield rec


def _one_by_one(
    process: Process, todo: Iterable[tuple[InputRecord, int]], per_record: int
) -> Iterator[tuple[InputRecord, Iterable[str]]]:
    for rec, done in todo:
        yield rec, (process(rec, done) if done < per_record else ())


def stderr_report(line: str) -> None:
    """The summary line on stderr."""
    print(f"ministruct: {line}", file=sys.stderr)
