"""`ministruct convert`: print the constraint as GBNF or as a regex."""

from __future__ import annotations

from typing import Annotated

import typer

from ministruct.cli import options as o
from ministruct.cli.base import app, warn
from ministruct.errors import UsageError


@app.command()
@o.constraint_flags
def convert(
    to: Annotated[str, typer.Option("--to", help="gbnf or regex.")] = "gbnf",
    *,
    constraint: o.ConstraintFlags,
) -> None:
    """Print the constraint converted to another notation."""
    c = constraint.load()
    for w in c.warnings:
        warn(w)
    if to == "gbnf":
        typer.echo(c.grammar.to_gbnf(), nl=False)
    elif to == "regex":
        from ministruct.grammar.regex import grammar_to_regex

        typer.echo(grammar_to_regex(c.grammar))
    elif to == "lark":
        raise UsageError("--to lark is not supported yet; use gbnf or regex")
    else:
        raise UsageError(f"--to must be gbnf or regex, got {to!r}")
