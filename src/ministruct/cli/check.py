"""`ministruct check`: does a text (or each input record) match the constraint?"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterator, Optional

import typer

from ministruct.cli.base import app, warn
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags, documents_from_flag
from ministruct.cli.options import AllowExtraFields, ResumeFile
from ministruct.cli.think_options import ThinkFlags, think_flags
from ministruct.errors import MinistructError, UsageError
from ministruct.jobs.records import InputRecord, open_lines, read_records, write_line, write_record

if TYPE_CHECKING:
    from ministruct.jobs.batch import ConstraintCache


@app.command()
@constraint_flags
@think_flags
def check(
    text: Annotated[Optional[str], typer.Argument(help="The text to check (or use --input).")] = None,
    input: Annotated[
        Optional[str],
        typer.Option("--input", help="JSONL records with 'text' (and 'id'), or plain lines; '-' for stdin."),
    ] = None,
    format: Annotated[
        Optional[str], typer.Option("--format", help="text or jsonl (jsonl is the default with --input).")
    ] = None,
    prefix: Annotated[
        bool, typer.Option("--prefix", help="Ask whether the text can still be completed instead.")
    ] = False,
    as_generated: Annotated[
        bool,
        typer.Option(
            "--as-generated",
            help="With --schema: ask whether ministruct could have generated TEXT (its key order, whitespace "
            "and properties), not whether TEXT is a valid instance.",
        ),
    ] = False,
    allow_extra_fields: AllowExtraFields = False,
    resume: ResumeFile = None,
    *,
    constraint: ConstraintFlags,
    think: ThinkFlags,
) -> None:
    """Check TEXT against the constraint; exit 1 on rejection, saying where and what was expected.

    With --schema: is TEXT a valid instance (any key order and whitespace)? A rejection
    names the JSON pointer and keyword. --as-generated or --prefix ask the grammar instead.
    With --think: the text after the first closing tag is checked (--think-close; without
    --model, the plain-text pair of the preset).
    """
    if (text is None) == (input is None):
        raise UsageError("give either a TEXT argument or --input FILE")
    fmt = format or ("jsonl" if input is not None else "text")
    if fmt not in ("text", "jsonl"):
        raise UsageError(f"--format must be text or jsonl, got {fmt!r}")
    constraint.refuse_stdin_twice(input)
    verdict = _thinking_first(_verdict(constraint, prefix, as_generated), think, prefix, constraint)
    if text is not None:
        if resume is not None or allow_extra_fields:
            raise UsageError("--resume and --allow-extra-fields apply to --input")
        res = verdict(text)
        if fmt == "jsonl":
            write_record({"index": 1, "id": 1, "accepted": res.accepted, "error": res.message()})
        else:
            write_line("ok" if res.accepted else f"rejected at {res.message()}")
        raise typer.Exit(0 if res.accepted else 1)
    from ministruct.jobs.batch import (
        CHECK_LABELS,
        CHECK_SETTINGS,
        ConstraintCache,
        Resume,
        run_batch,
        stderr_report,
        validated,
        with_constraint,
    )

    cache = ConstraintCache(
        lambda kind, value: _thinking_first(
            _verdict(with_constraint(constraint, kind, value), prefix, as_generated), think, prefix, constraint
        )
    )
    with open_lines(input) as (lines, source):
        records = read_records(lines, "text", source, settings=CHECK_SETTINGS, allow_extra=allow_extra_fields)
        status = run_batch(
            validated(records),
            _checker(verdict, cache, fmt),
            labels=CHECK_LABELS,
            resume=Resume.load(resume),
            report=stderr_report,
        )
    raise typer.Exit(status)


def _checker(
    verdict: Callable[[str], Any], cache: ConstraintCache, fmt: str
) -> Callable[[InputRecord, int], Iterator[str]]:
    """The per-record step of run_batch: check one record (with its own constraint, if it
    names one), write its result, yield its status."""
    from ministruct.jobs.batch import record_constraint

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
            res = (cache.get(*own) if own else verdict)(rec.value)
        except MinistructError as e:
            emit(rec, None, f"{rec.where}: {e}")
            yield "failed"
            return
        emit(rec, res.accepted, res.message())
        yield "accepted" if res.accepted else "rejected"

    return process


def _thinking_first(
    verdict: Callable[[str], Any], think: ThinkFlags, prefix: bool, constraint: ConstraintFlags
) -> Callable[[str], Any]:
    """With the think flags: the verdict on the text after the closing tag (the preset's tags:
    --chat-template's family's, else the plain pair)."""
    settings = think.settings(template=constraint.template_text())
    if settings is None:
        return verdict
    from ministruct.check.think import after_close

    return after_close(verdict, close=settings.close, open=settings.open, free=settings.grammar, prefix=prefix)


def _verdict(constraint: ConstraintFlags, prefix: bool, as_generated: bool) -> Callable[[str], Any]:
    """text -> result with `.accepted` and `.message()`, for the question the flags ask."""
    if constraint.schema is not None and not (prefix or as_generated):
        if constraint.extra_properties == "explicit":
            raise UsageError("--extra-properties explicit asks about generated text: add --as-generated")
        from ministruct.check.instance import InstanceChecker  # each checker loads when its question is asked
        from ministruct.grammar.constraint import load_schema_text, read_text
        from ministruct.grammar.schema.documents import document_registry

        text, source = read_text(constraint.schema, "schema")
        registry = document_registry(documents_from_flag(constraint.schema_documents))
        return InstanceChecker(load_schema_text(text, source), source=source, registry=registry).check
    if as_generated and constraint.schema is None and constraint.tools is None:
        raise UsageError("--as-generated applies to --schema and --tools")
    c = constraint.load()
    for w in c.warnings:
        warn(w)
    if c.tools is not None and not (prefix or as_generated):
        from ministruct.check.tool_calls import ToolCallChecker

        return ToolCallChecker(c.tools, source=c.source).check
    from ministruct.check.grammar import check_text

    return lambda value: check_text(c.grammar, value, prefix=prefix)
