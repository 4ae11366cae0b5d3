"""Lark text (llguidance's dialect) -> a checked Grammar: `parse_lark`.

syntax.py reads the text (Lark's LALR parser over lexer.py's tokens), compile.py gives
it its meaning (terminals.py its terminals'), analysis.check_grammar checks the result as
for every front end. Every
error is a GrammarSyntaxError at a line and column, naming the feature and why.
"""

from __future__ import annotations

from ministruct.errors import GrammarSyntaxError, UsageError
from ministruct.grammar.analysis import check_grammar
from ministruct.grammar.ir import Grammar, gc_paused
from ministruct.grammar.lark.compile import compile_items
from ministruct.grammar.lark.lexer import Positions
from ministruct.grammar.lark.syntax import LarkProblem
from ministruct.grammar.schema import SchemaOptions

LEXERS = ("greedy", "cfl")


def parse_lark(
    text: str, *, source: str = "<lark>", schema_options: SchemaOptions | None = None, lexer: str = "greedy"
) -> Grammar:
    """The Grammar of a Lark grammar, starting at its rule `start` (the IR's `root`).

    `lexer`: "greedy" (the default) reads lexemes as llguidance and Lark's own lexers do,
    each the longest match (`SELECT aFROMb` has one name after SELECT); "cfl" reads the
    grammar as the context-free language over its terminals (any split of the text into
    terminals, as XGrammar). `schema_options` apply to its `%json {...}` schemas (their
    `x-guidance` may override)."""
    if lexer not in LEXERS:
        raise UsageError(f"lexer must be 'greedy' or 'cfl', got {lexer!r}", parameter="lexer")
    if not isinstance(text, str):
        raise GrammarSyntaxError("a Lark grammar must be text (str)", source=source)
    try:
        with gc_paused():
            g = compile_items(text, source, schema_options or SchemaOptions(), lexer)
    except LarkProblem as p:
        if p.tok is not None:
            line, col = p.tok.line, p.tok.column
        else:
            line, col = Positions(text).line_col(min(p.pos if p.pos is not None else len(text), len(text)))
        raise GrammarSyntaxError(p.reason, source=source, text=text, line=line, column=col) from None
    except RecursionError:
        raise GrammarSyntaxError("grammar nested too deeply", source=source, text=text) from None
    return check_grammar(g)
