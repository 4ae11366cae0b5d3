"""Regular expressions (Python's `re` syntax) <-> grammar IR: `parse_regex`, `grammar_to_regex`.

Each loads on first use: the printer alone (a schema's `not` patterns) needs no parser.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"parse_regex": "ministruct.grammar.regex.parse", "grammar_to_regex": "ministruct.grammar.regex.printer"}

__all__ = ["parse_regex", "grammar_to_regex"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
