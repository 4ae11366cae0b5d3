"""$ref cycles and recursion that never ends (issue 29): refused with their pointer, or
pruned away; no schema ever becomes a left-recursive grammar."""

from __future__ import annotations

import pytest

from ministruct.check.instance import InstanceChecker
from ministruct.errors import SchemaError
from ministruct.grammar.analysis import find_left_recursion
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema.cycles import in_place_ref_cycle

CYCLE = {
    "anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}],
    "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
}


@pytest.mark.parametrize(
    "schema, cycle",
    [
        (CYCLE, ["/$defs/a", "/$defs/b", "/$defs/a"]),
        ({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}}, "$ref": "#/$defs/a"}, None),
        ({"$ref": "#"}, ["", ""]),
        ({"properties": {"x": {"allOf": [{"$ref": "#/properties/x"}]}}}, None),
        ({"not": {"$ref": "#"}}, ["", "/not", ""]),
    ],
)
def test_in_place_cycles_are_found(schema, cycle):
    got = in_place_ref_cycle(schema)
    if cycle is None:
        assert got is not None and got[0] == got[-1]
    else:
        assert got == cycle


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$defs": {"t": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": "#/$defs/t"}}]}},
            "$ref": "#/$defs/t",
        },
        {"properties": {"next": {"$ref": "#"}}, "type": "object"},
        {"$defs": {"unused": {"$ref": "#/$defs/unused"}}, "type": "null"},  # never applied: no loop
    ],
)
def test_recursion_through_a_part_of_the_value_is_no_cycle(schema):
    assert in_place_ref_cycle(schema) is None
    g = Constraint.from_json_schema(schema).grammar
    assert find_left_recursion(g) is None


def test_the_cycle_from_the_issue_is_refused_with_its_pointer_by_convert_and_check():
    # it was `ref-defs-a ::= ref-defs-b`, `ref-defs-b ::= ref-defs-a` (llama.cpp's server died),
    # and check said "the value nests too deeply to validate (keyword None)"
    for build in (Constraint.from_json_schema, InstanceChecker):
        with pytest.raises(SchemaError) as e:
            build(CYCLE)
        assert e.value.pointer == "/$defs/a" and e.value.keyword == "$ref"
        assert "/$defs/a -> /$defs/b -> /$defs/a" in str(e.value)


def test_a_branch_whose_recursion_never_ends_is_pruned():
    schema = {
        "anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}],
        "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}},
    }
    g = Constraint.from_json_schema(schema).grammar
    assert list(g.rules) == ["root"] and g.to_gbnf().strip() == 'root ::= "null"'
    assert InstanceChecker(schema).check("null").accepted
