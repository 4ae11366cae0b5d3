"""`ministruct check`: does a text (or each input record) match the constraint?"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Callable, Optional

import typer

from ..constraints import load_schema_text, read_text
from ..engine.check import check_text
from ..errors import UsageError
from ..instance import InstanceChecker
from ..records import read_records, write_record
from . import options as o
from .base import app, warn


@app.command()
@o.constraint_flags
def check(
    text: Annotated[Optional[str], typer.Argument(help="The text to check (or use --input).")] = None,
    input: Annotated[Optional[str], typer.Option("--input", help="JSONL records with 'text' (and 'id'), or plain lines; '-' for stdin.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", help="text or jsonl (jsonl is the default with --input).")] = None,
    prefix: Annotated[bool, typer.Option("--prefix", help="Ask whether the text can still be completed instead.")] = False,
    as_generated: Annotated[bool, typer.Option("--as-generated", help="With --schema: ask whether ministruct could have generated TEXT (its key order, whitespace and properties), not whether TEXT is a valid instance.")] = False,
    *,
    constraint: o.ConstraintFlags,
) -> None:
    """Check TEXT against the constraint; exit 1 on rejection, saying where and what was expected.

    With --schema: is TEXT a valid instance (any key order and whitespace)? A rejection
    names the JSON pointer and keyword. --as-generated or --prefix ask the grammar instead.
    """
    if (text is None) == (input is None):
        raise UsageError("give either a TEXT argument or --input FILE")
    fmt = format or ("jsonl" if input is not None else "text")
    if fmt not in ("text", "jsonl"):
        raise UsageError(f"--format must be text or jsonl, got {fmt!r}")
    verdict = _verdict(constraint, prefix, as_generated)
    if text is not None:
        records = [(1, 1, text, None)]
    else:
        if input == "-":
            stream, source = sys.stdin, "<stdin>"
        else:
            body, source = read_text(input, "input")
            stream = body.splitlines(keepends=True)
        records = ((r.index, r.id, r.value, r.error) for r in read_records(stream, "text", source))
    status = 0
    for index, rid, value, err in records:
        if err is not None:
            status = 2
            if fmt == "jsonl":
                write_record({"index": index, "id": rid, "accepted": None, "error": err})
            else:
                print(f"ministruct: error: {err}", file=sys.stderr)
            continue
        res = verdict(value)
        if not res.accepted:
            status = max(status, 1)
        if fmt == "jsonl":
            write_record({"index": index, "id": rid, "accepted": res.accepted, "error": res.message()})
        elif res.accepted:
            print("ok" if text is not None else f"{rid}: ok")
        else:
            label = "" if text is not None else f"{rid}: "
            print(f"{label}rejected at {res.message()}")
    raise typer.Exit(status)


def _verdict(constraint: o.ConstraintFlags, prefix: bool, as_generated: bool) -> Callable[[str], Any]:
    """text -> result with `.accepted` and `.message()`, for the question the flags ask."""
    if constraint.schema is not None and not (prefix or as_generated):
        if constraint.extra_properties == "explicit":
            raise UsageError("--extra-properties explicit asks about generated text: add --as-generated")
        text, source = read_text(constraint.schema, "schema")
        return InstanceChecker(load_schema_text(text, source), source=source).check
    if as_generated and constraint.schema is None:
        raise UsageError("--as-generated applies to --schema")
    c = constraint.load()
    for w in c.warnings:
        warn(w)
    return lambda value: check_text(c.grammar, value, prefix=prefix)
