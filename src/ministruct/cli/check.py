"""`ministruct check`: does a text (or each input record) match the constraint?"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Annotated, Iterator, Optional

import typer

from ..batch import CHECK_LABELS, CHECK_SETTINGS, ConstraintCache, Resume, record_constraint, run_batch, stderr_report, validated
from ..constraints import Constraint
from ..engine.check import check_text
from ..errors import MinistructError, UsageError
from ..records import InputRecord, open_lines, read_records, write_line, write_record
from . import options as o
from .app import app, warn


@app.command()
@o.constraint_flags
def check(
    text: Annotated[Optional[str], typer.Argument(help="The text to check (or use --input).")] = None,
    input: Annotated[Optional[str], typer.Option("--input", help="JSONL records with 'text' (and 'id'), or plain lines; '-' for stdin.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", help="text or jsonl (jsonl is the default with --input).")] = None,
    prefix: Annotated[bool, typer.Option("--prefix", help="Ask whether the text can still be completed instead.")] = False,
    allow_extra_fields: o.AllowExtraFields = False,
    resume: o.ResumeFile = None,
    *,
    constraint: o.ConstraintFlags,
) -> None:
    """Check TEXT against the constraint; exit 1 on rejection, saying where and what was expected."""
    if (text is None) == (input is None):
        raise UsageError("give either a TEXT argument or --input FILE")
    fmt = format or ("jsonl" if input is not None else "text")
    if fmt not in ("text", "jsonl"):
        raise UsageError(f"--format must be text or jsonl, got {fmt!r}")
    c = constraint.load()
    for w in c.warnings:
        warn(w)
    if text is not None:
        if resume is not None or allow_extra_fields:
            raise UsageError("--resume and --allow-extra-fields apply to --input")
        res = check_text(c.grammar, text, prefix=prefix)
        if fmt == "jsonl":
            write_record({"index": 1, "id": 1, "accepted": res.accepted, "error": res.message()})
        else:
            write_line("ok" if res.accepted else f"rejected at {res.message()}")
        raise typer.Exit(0 if res.accepted else 1)
    cache = ConstraintCache(asdict(constraint), on_load=lambda k: [warn(w) for w in k.warnings])
    resumed = Resume.load(resume)
    with open_lines(input) as (lines, source):
        records = read_records(lines, "text", source, settings=CHECK_SETTINGS, allow_extra=allow_extra_fields)
        process = _checker(c, cache, fmt, prefix)
        status = run_batch(validated(records), process, labels=CHECK_LABELS, resume=resumed, report=stderr_report)
    raise typer.Exit(status)


def _checker(c: Constraint, cache: ConstraintCache, fmt: str, prefix: bool):
    """The per-record step of run_batch: check one record, write its result, yield its status."""

    def emit(rec: InputRecord, accepted: bool | None, error: str | None) -> None:
        if fmt == "jsonl":
            out = {"index": rec.index, "id": rec.id, "accepted": accepted, "error": error}
            for k, v in rec.extra.items():
                out.setdefault(k, v)
            write_record(out)
        elif accepted is None:
            print(f"ministruct: error: {error}", file=sys.stderr)
        else:
            write_line(f"{rec.id}: ok" if accepted else f"{rec.id}: rejected at {error}")

    def process(rec: InputRecord, done: int) -> Iterator[str]:
        if rec.error is not None:
            emit(rec, None, rec.error)
            yield "failed"
            return
        try:
            own = record_constraint(rec.settings)
            res = check_text((cache.get(*own) if own else c).grammar, rec.value, prefix=prefix)
        except MinistructError as e:
            emit(rec, None, f"{rec.where}: {e}")
            yield "failed"
            return
        emit(rec, res.accepted, res.message())
        yield "accepted" if res.accepted else "rejected"

    return process
