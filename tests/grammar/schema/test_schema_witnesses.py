"""A property the schema does not list, asked for by what fails: `not: {propertyNames:
{not: {pattern}}}` (some name a pattern finds) and `not: {patternProperties: {P: S}}`
(some name P finds whose value fails S), alone, together and beside properties,
propertyNames, patternProperties and property counts. Against the `jsonschema`
validator: no false accepts, under the spec policy no false rejects, samples valid."""

from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grammar.helpers import duplicate_keys, sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PATTERNS = ["a", "1", "^b", "a1", "x$"]
FAILED_VALUES = [False, {"type": "integer"}, {"type": "string"}, {"const": 1}]
# what fails: some name the pattern finds; or some name it finds with a value S rejects
_WITNESS = st.one_of(
    st.builds(lambda p: {"not": {"propertyNames": {"not": {"pattern": p}}}}, st.sampled_from(PATTERNS)),
    st.builds(
        lambda p, s: {"not": {"patternProperties": {p: s if s is False else {"not": s}}}},
        st.sampled_from(PATTERNS),
        st.sampled_from(FAILED_VALUES),
    ),
)
_AROUND = st.fixed_dictionaries(
    {},
    optional={
        "properties": st.sampled_from([{"a1": {"type": "integer"}}, {"b": {"type": "string"}, "x": True}]),
        "propertyNames": st.sampled_from([{"pattern": "^..$"}, {"pattern": "^[ab1]*$"}]),
        "patternProperties": st.sampled_from([{"^b": {"type": "integer"}}, {"1": {"const": 1}}]),
        "additionalProperties": st.sampled_from([{"type": ["integer", "string"]}, {"const": 1}]),
        "unevaluatedProperties": st.sampled_from([False, {"type": "integer"}]),
        "minProperties": st.integers(0, 3),
        "maxProperties": st.integers(1, 3),
    },
)
KEYS = st.sampled_from(["a", "b", "1", "a1", "ba", "b1", "x", "ax", "1a1", "xb"])
VALUES = st.sampled_from([1, 2, "s", None, [1]])
INSTANCES = st.dictionaries(KEYS, VALUES, max_size=4)


@SETTINGS
@given(_AROUND, st.lists(_WITNESS, min_size=1, max_size=3), st.lists(INSTANCES, min_size=1, max_size=12))
def test_a_property_asked_for_by_what_fails_is_exact(around, witnesses, instances):
    schema = {"type": "object", **around, "allOf": witnesses}
    validator = Draft202012Validator(schema)
    for policy in ("spec", "explicit"):
        try:
            g = schema_to_grammar(schema, extra_properties=policy)
        except SchemaError as e:
            assert "accepts no value" in str(e), (schema, e)
            assert policy == "explicit" or not any(validator.is_valid(v) for v in instances), schema
            continue
        for v in instances:
            got = accepts(g, json.dumps(canonical_order(v, schema)))
            assert not got or validator.is_valid(v), ("false accept", policy, schema, v)
            if policy == "spec":  # every object the schema allows, its extra keys in any order
                assert got or not validator.is_valid(v), ("false reject", schema, v)
        for text in sample_strings(g, random.Random(1), count=15):
            if not duplicate_keys(text):
                assert validator.is_valid(json.loads(text)), ("generated an invalid instance", policy, schema, text)


def test_a_name_two_negated_property_names_ask_for_is_one_name_under_max_properties():
    """maxProperties 1 and two patterns that must each find a name: one name holds both."""
    schema = {
        "type": "object",
        "propertyNames": {"pattern": "^....$"},
        "maxProperties": 1,
        "allOf": [{"not": {"propertyNames": {"not": {"pattern": p}}}} for p in ("a1", "b2")],
    }
    g = schema_to_grammar(schema)
    assert accepts(g, '{"a1b2": 0}') and accepts(g, '{"b2a1": []}')
    assert not accepts(g, '{"a1xx": 0}') and not accepts(g, '{"a1b2x": 0}') and not accepts(g, "{}")
    for text in sample_strings(g, random.Random(0), count=30):
        assert Draft202012Validator(schema).is_valid(json.loads(text)), text


def test_a_pattern_property_whose_value_fails_is_generated_with_that_value():
    """`not: {patternProperties: {"^x-": {not: {const: "on"}}}}`: some x- name holds "on"."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "additionalProperties": {"type": "string"},
        "not": {"patternProperties": {"^x-": {"not": {"const": "on"}}}},
    }
    g = schema_to_grammar(schema)
    assert accepts(g, '{"name": "n", "x-flag": "on"}') and accepts(g, '{"y": "off", "x-": "on"}')
    assert not accepts(g, '{"name": "n", "x-flag": "off"}') and not accepts(g, '{"name": "n"}')
    assert not accepts(g, '{"flag-x-": "on"}')


_BRANCH = st.builds(
    lambda p, s: {"patternProperties": {p: s}}, st.sampled_from(PATTERNS), st.sampled_from(FAILED_VALUES[1:])
)


@SETTINGS
@given(
    st.lists(_BRANCH, min_size=2, max_size=3),
    st.sampled_from([{}, {"maxProperties": 2}, {"additionalProperties": {"type": "integer"}}]),
    st.lists(INSTANCES, min_size=1, max_size=12),
)
def test_exactly_one_of_pattern_property_branches(branches, around, instances):
    """`oneOf` of patternProperties branches: a branch minus the others asks for a name
    another branch's pattern finds, with a value that branch rejects."""
    schema = {"type": "object", **around, "oneOf": branches}
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e), (schema, e)
        assert not any(validator.is_valid(v) for v in instances), schema
        return
    for v in instances:
        got = accepts(g, json.dumps(canonical_order(v, schema)))
        assert got == validator.is_valid(v), (schema, v, got)
    for text in sample_strings(g, random.Random(2), count=15):
        if not duplicate_keys(text):
            assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)


def test_a_witness_under_large_property_counts_is_counted_without_deep_recursion():
    """Counts into the thousands: the members after the listed names are built bottom up
    (no recursion as deep as maxProperties); past the limit, a refusal naming `not`."""
    schema = {
        "type": "object",
        "minProperties": 2,
        "maxProperties": 1500,
        "not": {"propertyNames": {"not": {"pattern": "z"}}},
    }
    g = schema_to_grammar(schema)
    assert accepts(g, '{"a": 1, "z": 2}') and not accepts(g, '{"a": 1, "y": 2}') and not accepts(g, '{"z": 2}')
    many = {**schema, "maxProperties": 3900, "allOf": [{"not": {"propertyNames": {"not": {"pattern": "y"}}}}]}
    with pytest.raises(SchemaError, match="/not.*the limit"):
        schema_to_grammar(many)
