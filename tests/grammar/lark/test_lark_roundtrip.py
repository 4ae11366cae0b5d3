"""Printing as Lark and reading back keeps the language: on the bundled grammars and
llama.cpp's (with llama.cpp's own test strings) and on random grammars (hypothesis)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grammar.helpers import sample_strings, shared_suites
from ministruct.check.grammar import check_text
from ministruct.grammar.constraint import BUNDLED_GRAMMARS
from ministruct.grammar.gbnf import parse_gbnf
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, RuleRef, alt, seq
from ministruct.grammar.lark import grammar_to_lark, parse_lark

LLAMACPP = shared_suites() / "llamacpp"
GBNF_CASES = (
    [c for c in json.loads((LLAMACPP / "grammar_cases.json").read_text()) if c["kind"] == "gbnf"]
    if LLAMACPP.is_dir()
    else []
)
GRAMMAR_FILES = sorted(BUNDLED_GRAMMARS.glob("*.gbnf")) + sorted((LLAMACPP / "grammars").glob("*.gbnf"))


def _round_trip(g: Grammar) -> Grammar:
    # read back as the language over the terminals: a printed GBNF grammar's terminals are
    # its character classes, and greedy lexemes would change its meaning (docs/constraints.md)
    return parse_lark(grammar_to_lark(g), source="printed", lexer="cfl")


@pytest.mark.parametrize("case", [c for c in GBNF_CASES if not c.get("has_token_inputs")], ids=lambda c: c["name"])
def test_llamacpp_strings_agree_after_round_trip(case):
    original = parse_gbnf(case["grammar"])
    back = _round_trip(original)
    for s in case["pass"]:
        assert check_text(back, s).accepted, s
    for s in case["fail"]:
        assert not check_text(back, s).accepted, s


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_reference_grammars_round_trip(path):
    original = parse_gbnf(path.read_text(encoding="utf-8"))
    back = _round_trip(original)
    rng = random.Random(path.name)
    probes = sample_strings(original, rng, count=40)
    probes += [s[:-1] for s in probes if s] + [s + "}" for s in probes]  # near misses too
    strings = {case_s for c in GBNF_CASES for case_s in c["pass"] + c["fail"]}
    for s in probes + sorted(strings):
        assert check_text(back, s).accepted == check_text(original, s).accepted, repr(s)


def test_token_cases_keep_their_atoms():
    for c in (c for c in GBNF_CASES if c.get("has_token_inputs")):
        original = parse_gbnf(c["grammar"])
        assert _round_trip(original).rules["root"] == original.rules["root"]


_leaf = st.one_of(
    st.text(alphabet='ab"\\\n/', max_size=3).map(Literal),
    st.lists(st.tuples(st.integers(0x20, 0x7E), st.integers(0, 3)), min_size=1, max_size=2).map(
        lambda rs: CharClass(tuple((a, min(a + d, 0x7E)) for a, d in rs))
    ),
    st.just(RuleRef("r")),
)
_expr = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: seq(*xs)),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: alt(*xs)),
        st.tuples(inner, st.integers(0, 2), st.sampled_from([None, 0, 1, 3])).map(
            lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(_expr, st.integers(0, 2**16))
def test_random_grammars_round_trip(root, seed):
    g = Grammar({"root": seq(Literal("<"), root, Literal(">")), "r": alt(Literal("x"), Literal(""))})
    back = _round_trip(g)
    rng = random.Random(seed)
    probes = sample_strings(g, rng, count=10)
    probes += [s[1:] for s in probes] + [s + "x" for s in probes] + ["", "<>", '<a"b>']
    for s in probes:
        assert check_text(back, s).accepted == check_text(g, s).accepted, repr(s)


def test_printing_what_lark_cannot_say_is_an_error():
    from ministruct.errors import GrammarError
    from ministruct.grammar.ir import TokenRef

    g = Grammar({"root": seq(Literal("a"), TokenRef(name="<|end|>", negated=True))})
    with pytest.raises(GrammarError, match="negates the token"):
        grammar_to_lark(g)
    assert grammar_to_lark(Grammar({"root": TokenRef(7, negated=True)})) == "start: <[^7]>\n"


def test_regular_rules_print_as_terminals():
    text = grammar_to_lark(parse_gbnf('root ::= item ("," item)*\nitem ::= [a-z]+ | "(" root ")"\nws ::= " "*'))
    assert "WS: " in text and "item: " in text  # ws is regular; item is recursive through root
