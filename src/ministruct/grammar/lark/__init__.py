"""Lark grammars (llguidance's dialect) <-> grammar IR: `parse_lark`, `grammar_to_lark`."""

from ministruct.grammar.lark.parse import parse_lark
from ministruct.grammar.lark.printer import grammar_to_lark

__all__ = ["parse_lark", "grammar_to_lark"]
