"""Flag definitions shared by the commands (cli.md is the contract for their names)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..constraints import Constraint, load_constraint

Regex = Annotated[Optional[str], typer.Option("--regex", help="A regular expression the whole output must match.", rich_help_panel="Constraint")]
GrammarOpt = Annotated[Optional[str], typer.Option("--grammar", help="A GBNF grammar file, or a bundled grammar's name (json, digits, ...).", rich_help_panel="Constraint")]
Schema = Annotated[Optional[str], typer.Option("--schema", help="A JSON Schema file ('-' for stdin).", rich_help_panel="Constraint")]
Choice = Annotated[Optional[list[str]], typer.Option("--choice", help="One of these strings (repeat the flag).", rich_help_panel="Constraint")]
LarkOpt = Annotated[Optional[str], typer.Option("--lark", help="A Lark grammar (not supported yet).", rich_help_panel="Constraint", hidden=True)]
Root = Annotated[Optional[str], typer.Option("--root", help="Start rule of a --grammar.", rich_help_panel="Constraint")]
Whitespace = Annotated[str, typer.Option("--whitespace", help="JSON whitespace for --schema: compact, flexible or pretty.", rich_help_panel="Constraint")]
Lenient = Annotated[bool, typer.Option("--lenient", help="Ignore schema keywords that cannot be enforced (one warning each).", rich_help_panel="Constraint")]
OneOfAsAnyOf = Annotated[bool, typer.Option("--oneof-as-anyof", help="Treat a oneOf whose branches may overlap as anyOf.", rich_help_panel="Constraint")]

Model = Annotated[Optional[str], typer.Option("--model", help="GGUF model file (default: env MINISTRUCT_MODEL, else the bundled SmolLM2-135M).", rich_help_panel="Model and sampling")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", min=1, help="Stop after this many tokens.", rich_help_panel="Model and sampling")]
Temperature = Annotated[float, typer.Option("--temperature", help="0 is greedy.", rich_help_panel="Model and sampling")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus mass in (0, 1].", rich_help_panel="Model and sampling")]
TopK = Annotated[int, typer.Option("--top-k", help="Keep the K most probable tokens (0: off).", rich_help_panel="Model and sampling")]
RepeatPenalty = Annotated[float, typer.Option("--repeat-penalty", help="1.0 is off.", rich_help_panel="Model and sampling")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed (deterministic per seed).", rich_help_panel="Model and sampling")]
Chat = Annotated[bool, typer.Option("--chat/--raw", help="Apply the model's chat template, or send the prompt as is.", rich_help_panel="Model and sampling")]
System = Annotated[Optional[str], typer.Option("--system", help="System message (with --chat).", rich_help_panel="Model and sampling")]
ShowSchema = Annotated[bool, typer.Option("--show-schema/--withhold-schema", help="Put the schema text in the user message, or not.", rich_help_panel="Model and sampling")]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="No progress display on stderr.")]


def constraint_from_flags(
    regex: str | None,
    grammar: str | None,
    schema: str | None,
    choice: list[str] | None,
    lark: str | None,
    root: str | None,
    whitespace: str,
    lenient: bool,
    oneof_as_anyof: bool = False,
) -> Constraint:
    """The one constraint the flags name (UsageError when none or several)."""
    return load_constraint(
        regex=regex, grammar=grammar, schema=schema, choice=choice, lark=lark, root=root,
        whitespace=whitespace, lenient=lenient, oneof_as_anyof=oneof_as_anyof,
    )
