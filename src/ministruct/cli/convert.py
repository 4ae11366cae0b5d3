"""`ministruct convert`: print the constraint as GBNF, Lark or a regex."""

from __future__ import annotations

from typing import Annotated

import typer

from ministruct.cli.base import app, warn
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags
from ministruct.cli.think_options import ThinkFlags, think_flags
from ministruct.errors import UsageError


@app.command()
@constraint_flags
@think_flags
def convert(
    to: Annotated[str, typer.Option("--to", help="gbnf, lark (llguidance's dialect) or regex.")] = "gbnf",
    *,
    constraint: ConstraintFlags,
    think: ThinkFlags,
) -> None:
    """Print the constraint converted to another notation (with --think: free text, the
    closing tag, then the constraint, as one grammar)."""
    c = constraint.load()
    settings = think.settings(template=constraint.template_text())
    if settings is not None:
        from ministruct.engine.vocab import Vocabulary
        from ministruct.jobs.think import think_constraint

        c = think_constraint(c, settings, Vocabulary.from_bytes([]))  # no vocabulary: CLOSE is text
    for w in c.warnings:
        warn(w)
    if to not in ("gbnf", "regex", "lark"):
        raise UsageError(f"--to must be gbnf, lark or regex, got {to!r}")
    from ministruct.engine.automaton import Automaton

    Automaton(c.grammar)  # a grammar that matches nothing is refused here as by check and gen (GrammarError)
    if to != "lark" and c.grammar.lexer is not None:
        raise UsageError(
            f"--to {to}: a Lark grammar read with greedy lexemes (--lark-lexer greedy, the default) has no "
            f"{to.upper() if to == 'gbnf' else to} text: {to} has no lexer. Give --lark-lexer cfl to print "
            "the language over its terminals (it may hold strings the greedy reading refuses)"
        )
    if to == "gbnf":
        from ministruct.grammar.export import llama_gbnf

        typer.echo(llama_gbnf(c.grammar), nl=False)
    elif to == "regex":
        from ministruct.grammar.regex import grammar_to_regex

        typer.echo(grammar_to_regex(c.grammar))
    elif to == "lark":
        from ministruct.grammar.lark import grammar_to_lark

        typer.echo(grammar_to_lark(c.grammar), nl=False)
