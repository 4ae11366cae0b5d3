"""JSON text as RFC 8259 defines it: NaN and Infinity, which Python's json reads, are not JSON."""

from __future__ import annotations

import json

import pytest

from ministruct.errors import InputError, SchemaError
from ministruct.grammar.constraint import Constraint, load_constraint
from ministruct.grammar.json_text import parse_json, parse_json_prefix


@pytest.mark.parametrize(
    "text, name, column",
    [
        ('{"enum": [NaN]}', "NaN", 11),
        ('{"a": "NaN, Infinity", "b": -Infinity}', "-Infinity", 29),
        ("Infinity", "Infinity", 1),
    ],
)
def test_nan_and_infinity_are_not_json_and_the_error_says_where(text, name, column):
    with pytest.raises(json.JSONDecodeError) as e:
        parse_json(text)
    assert e.value.msg == f"{name} is not a JSON number" and e.value.colno == column


def test_json_still_reads_what_json_is():
    assert parse_json('{"a": ["NaN", 1e400, -0.5, null]}') == {"a": ["NaN", float("inf"), -0.5, None]}
    assert parse_json_prefix('x {"a": 1} rest', 2) == ({"a": 1}, 10)
    with pytest.raises(json.JSONDecodeError) as e:
        parse_json_prefix('x {"a": NaN} rest', 2)
    assert e.value.pos == 8


def test_a_schema_or_tool_list_with_nan_is_refused_naming_the_place(tmp_path):
    # {"enum": [NaN, Infinity]} compiled to root ::= "NaN" | "Infinity": gen wrote "json": Infinity in its record
    with pytest.raises(SchemaError, match=r"s.json: not valid JSON: NaN is not a JSON number \(line 1, column 11\)"):
        (tmp_path / "s.json").write_text('{"enum": [NaN, Infinity]}')
        load_constraint(schema=str(tmp_path / "s.json"))
    with pytest.raises(SchemaError, match="NaN is not a JSON number"):
        Constraint.from_json_schema('{"const": NaN}')
    tools = '[{"type": "function", "function": {"name": "f", "parameters": {"properties": {"x": {"const": NaN}}}}}]'
    with pytest.raises(InputError, match="NaN is not a JSON number"):
        Constraint.from_tools(tools)
    with pytest.raises(Exception, match="-Infinity is not a JSON number"):
        Constraint.from_lark('start: %json {"const": -Infinity}')
