"""Help that reads as a person expects: each option's value named the way man pages do
(`N`, `X`, `TEXT`; nothing after a switch) instead of Python types (`<bool>`,
`<list[str]>`), and docstrings re-flowed (a single line break inside a paragraph is a
space, as click does without Rich)."""

from __future__ import annotations

import re
from typing import Any

_FLOW = re.compile(r"(?<!\n)\n(?![\n\b])")
# type names as typer 0.29 (`bare_type`) and click's own types (typer 0.27-0.28) give them
_METAVARS = {
    "int": "N",
    "integer": "N",
    "integer range": "N",
    "int range": "N",
    "float": "X",
    "float range": "X",
    "str": "TEXT",
    "text": "TEXT",
    "list[str]": "TEXT",
}


def tidy(command: Any) -> Any:
    """`command` (a click command or group, Typer's) with tidy help, every subcommand too."""
    for param in getattr(command, "params", ()):
        if hasattr(param, "is_flag") and param.metavar is None:  # an option, not an argument
            param.metavar = "" if param.is_flag else _METAVARS.get(_type_name(param), "TEXT")
    for attr in ("help", "short_help"):
        text = getattr(command, attr, None)
        if text:
            setattr(command, attr, "\n\n".join(_FLOW.sub(" ", p) for p in text.split("\n\n")))
    if hasattr(command, "get_help_option"):
        command.get_help_option = _switch_help(command.get_help_option)
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
    return command


def _switch_help(get_help_option: Any) -> Any:
    """`get_help_option` whose --help shows no value (typer 0.29 would show `<bool>`)."""

    def get(ctx: Any) -> Any:
        option = get_help_option(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    return get


def _type_name(param: Any) -> str:
    bare = getattr(param, "bare_type", None)
    return bare() if callable(bare) else getattr(getattr(param, "type", None), "name", "text")
