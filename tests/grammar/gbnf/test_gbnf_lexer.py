"""GbnfLexer and LalrDriver against Lark: same terminals as gbnf.lark, same results as Lark's own loop."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammar.gbnf.test_gbnf import SAMPLES, VALID
from grammar.gbnf.test_gbnf_errors import CASES
from ministruct.errors import MinistructError
from ministruct.grammar.gbnf import parse as gbnf
from ministruct.grammar.gbnf.lexer import TERMINALS

REPO = Path(__file__).resolve().parents[3]
SUITES = REPO / ".." / "shared" / "suites" / "llamacpp"
_TEXT = st.lists(
    st.sampled_from(list('abrot:=|()[]^-"\\*+?{},.<>!#0129xU \t\n\r') + ["::=", "\\x41", "\\u00e9", "é", "\x00"]),
    max_size=30,
).map("".join)


def _lark_terminals() -> dict[str, str]:
    lark = gbnf._parser()[0]
    return {t.name: t.pattern.to_regexp() for t in lark.terminals}


def test_every_terminal_of_gbnf_lark_is_lexed():
    names = set(_lark_terminals())
    assert names - {"WS", "COMMENT"} == set(TERMINALS)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
def test_terminal_patterns_match_gbnf_lark(text):
    ours = TERMINALS
    for name, pattern in _lark_terminals().items():
        if name in ("WS", "COMMENT"):
            continue
        a, b = re.match(pattern, text), re.match(ours[name], text)
        assert (a and a.end()) == (b and b.end()), (name, text)


def _outcome(text: str, lark_loop: bool):
    try:
        g = gbnf._parse(text, "<grammar>", "root", lark_loop=lark_loop)
    except MinistructError as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", g.rules, g.warnings)


def _corpus() -> list[str]:
    texts = [t for t, _ in CASES] + list(SAMPLES) + list(VALID)
    texts += [p.read_text(encoding="utf-8") for p in sorted((REPO / "grammars").glob("*.gbnf"))]
    if SUITES.is_dir():
        texts += [p.read_text(encoding="utf-8") for p in sorted((SUITES / "grammars").glob("*.gbnf"))]
    return texts


@pytest.mark.parametrize("text", _corpus())
def test_driver_agrees_with_lark_loop(text):
    assert _outcome(text, False) == _outcome(text, True)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_TEXT, st.sampled_from(VALID).flatmap(lambda v: _TEXT.map(lambda t: v + t))))
def test_driver_agrees_with_lark_loop_on_random_text(text):
    assert _outcome(text, False) == _outcome(text, True)


def test_rule_ending_newlines_follow_llama_cpp():
    text = '\n\n# c\nroot ::=\n  a |\n  ( "x"\n  "y" )\n\n\na ::= "a"{ 1 , 2 }\n'
    lark, lexer, driver, _ = gbnf._parser()
    kinds = [t.type for t in lexer.tokens(text, lambda: set())]
    assert kinds == [
        "NAME", "DEFINE", "NAME", "VBAR", "LPAR", "LITERAL", "LITERAL", "RPAR", "NL",
        "NAME", "DEFINE", "LITERAL", "LBRACE", "INT", "COMMA", "INT", "RBRACE",
    ]  # fmt: skip
