"""The free-text-first combinator's language against plain string logic: the thinking
ends at the first CLOSE (`str.find`), the answer is checked by Python's `re`."""

from __future__ import annotations

import itertools
import re

import pytest

from ministruct.engine.automaton import accepts
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.gbnf import parse_gbnf
from ministruct.grammar.ir import Grammar, TokenRef
from ministruct.grammar.regex import parse_regex
from ministruct.grammar.think import free_text_then, split_free_text, text_not_starting_with, text_without


@pytest.mark.parametrize("close", ["ab", "abab", "aab", "aba", "aaa", "ba", "c"])
@pytest.mark.parametrize("may_end", [False, True])
def test_language_is_text_up_to_the_first_close_then_the_answer(close, may_end):
    g = free_text_then(parse_regex("[ab]?c"), close=close, may_end_in_free_text=may_end)
    for n in range(8):
        for t in itertools.product("abc", repeat=n):
            s = "".join(t)
            i = s.find(close)
            want = (i >= 0 and re.fullmatch("[ab]?c", s[i + len(close) :]) is not None) or (may_end and i < 0)
            assert accepts(g, s) == want, s


def test_gbnf_round_trip_and_the_answer_keeps_its_rules():
    answer = parse_gbnf('root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | root\n')
    g = free_text_then(answer, close="</think>", open="<think>")
    again = parse_gbnf(g.to_gbnf())
    assert again == g and g.root == "root" and "item" in g.rules
    for text, ok in [("hm</think>[1,[2]]", True), ("<think>x</think>[1]", True), ("[1]", False), ("</think>", False)]:
        assert accepts(again, text) == ok, text


def test_a_grammar_for_the_thinking_and_a_token_close():
    free = parse_gbnf('root ::= "step" [0-9]\n')
    g = free_text_then(parse_regex("yes|no"), close=TokenRef(name="<|end|>"), free=free, open="<t>")
    assert "think-root" in g.rules and g.boundary.free_grammar
    assert "<|end|>" in g.to_gbnf()


def test_open_containing_close_and_twice_are_refused():
    with pytest.raises(ValueError, match="contains close"):
        free_text_then(parse_regex("a"), close="t>", open="<t>")
    g = free_text_then(parse_regex("a"), close="</t>")
    with pytest.raises(ValueError, match="twice"):
        free_text_then(g, close="</t>")


def test_constraint_think_first_keeps_the_answer():
    c = Constraint.from_json_schema({"type": "integer"}).think_first(close="</think>", open="<think>")
    assert c.kind == "schema" and c.answer_part.boundary is None and c.boundary.close == "</think>"
    assert c.describe()["think"]["close"] == "</think>"
    assert accepts(c.grammar, "let me see</think>42") and not accepts(c.grammar, "42")


def test_split_free_text():
    c = Constraint.from_regex("[0-9]+").think_first(close="</think>", open="<think>")
    assert split_free_text(c.boundary, "<think>so 4</think>42") == ("so 4", "42")
    assert split_free_text(c.boundary, "42") is None


@pytest.mark.parametrize("close", ["ab", "aab", "aba", "c"])
@pytest.mark.parametrize("may_end", [False, True])
def test_max_free_is_at_most_that_many_code_points_before_close(close, may_end):
    ans = parse_regex("[ab]?c")
    g = free_text_then(ans, close=close, max_free=3, may_end_in_free_text=may_end)
    for n in range(9):
        for t in itertools.product("abc", repeat=n):
            s = "".join(t)
            i = s.find(close)
            want = 0 <= i <= 3 and re.fullmatch("[ab]?c", s[i + len(close) :]) is not None
            want = want or (may_end and i < 0 and len(s) <= 3 + len(close) - 1 and _within(s, close, 3))
            assert accepts(g, s) == want, s


def _within(s: str, close: str, n: int) -> bool:
    """A text without CLOSE that fits the bound: at most n code points, then a prefix of CLOSE."""
    return any(len(s) - k <= n and s.endswith(close[:k]) for k in range(len(close)))


@pytest.mark.parametrize("word", ["<tool_call>", "[TOOL_CALLS]", "ab", "aba"])
def test_text_without_is_exactly_the_strings_not_containing_the_word(word):
    ends_at_first, never = text_without(word)
    alphabet = sorted(set(word)) + ["x"]
    near = [word, "x" + word, word[:-1], word[:-1] + "x" + word[-1], word + word[:-1], word[:-1] + word]
    strings = ["".join(t) for n in range(7 if len(word) < 4 else 5) for t in itertools.product(alphabet, repeat=n)]
    for s in strings + near:
        first = s.find(word)
        assert accepts(Grammar({"root": never}), s) == (first < 0), s
        assert accepts(Grammar({"root": ends_at_first}), s) == (first >= 0 and first + len(word) == len(s)), s


@pytest.mark.parametrize("prefix", ["{", "ab", "aab"])
def test_text_not_starting_with(prefix):
    g = Grammar({"root": text_not_starting_with(prefix)})
    for n in range(6):
        for t in itertools.product(sorted(set(prefix)) + ["x"], repeat=n):
            s = "".join(t)
            assert accepts(g, s) == (not s.startswith(prefix)), s
