"""Lark grammars (llguidance's dialect) <-> grammar IR: `parse_lark`, `grammar_to_lark`.

parse.py         parse_lark: text -> a checked Grammar
lexer.py         the dialect's tokens; syntax.py: its syntax tree (Lark's LALR parser)
compile.py       the syntax tree -> IR: rules, lexemes, %ignore, %json, %lark blocks
terminals.py     terminals as regular languages: strings, regexes, ranges, `&`, `~`
lazy.py          lazy lexemes (lazy, suffix, stop); gaps.py: no gap before the first lexeme
special.py       special tokens <|name|>, <[ids]>; substring.py: %regex {...}
json_escapes.py  %json's x-guidance escapes
printer.py       grammar_to_lark: IR -> Lark text
"""

from ministruct.grammar.lark.parse import parse_lark
from ministruct.grammar.lark.printer import grammar_to_lark

__all__ = ["parse_lark", "grammar_to_lark"]
