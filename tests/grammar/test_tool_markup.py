"""The pieces of the families' parameter grammars against brute force: a length-bounded raw
string followed by its closing markup is exactly the texts of that length whose first
closing markup is the one after them; keywords a raw string cannot be held to are refused
naming the parameter."""

from __future__ import annotations

import itertools

import pytest

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.ir import Grammar
from ministruct.grammar.tool_markup import bounded_then_end


@pytest.mark.parametrize(("end", "lo", "hi"), [("ab", 0, 3), ("aab", 1, 3), ("</p>", 0, 4), ("x", 2, None)])
def test_a_bounded_string_then_its_end_is_exact(end, lo, hi):
    rules: dict = {}
    root = bounded_then_end(end, lo, hi, rules.__setitem__)
    assert root is not None
    g = Grammar({"root": root, **rules})
    alphabet = sorted(set(end) | {"z"})
    for n in range(0, (hi if hi is not None else lo + 2) + 2):
        for chars in itertools.product(alphabet, repeat=n):
            value = "".join(chars)
            text = value + end
            want = text.find(end) == len(value) and lo <= len(value) and (hi is None or len(value) <= hi)
            assert accepts(g, text) == want, (value, end)


def tool(params: dict) -> list[dict]:
    return [{"type": "function", "function": {"name": "f", "parameters": params}}]


def test_what_raw_markup_cannot_hold_is_refused_naming_the_parameter():
    with pytest.raises(SchemaError, match="parameter s.*pattern with length bounds"):
        Constraint.from_tools(
            tool({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$", "maxLength": 3}}}),
            format="glm",
        )
    with pytest.raises(SchemaError, match="one by one.*anyOf"):
        Constraint.from_tools(tool({"anyOf": [{"type": "object"}]}), format="qwen3_coder")
    with pytest.raises(SchemaError, match="gemma4 arrays cannot be held to uniqueItems"):
        Constraint.from_tools(
            tool({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}), format="gemma4"
        )
    assert Constraint.from_tools(tool({"type": "object", "properties": {"o": {"type": "object"}}}), format="glm")
