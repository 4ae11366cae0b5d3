"""dependentRequired and the array form of `dependencies`, against the jsonschema validator."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

NAMES = "abcd"


@st.composite
def _schemas(draw):
    listed = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    deps = draw(
        st.dictionaries(st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), max_size=3, unique=True), max_size=3)
    )
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in listed},
        "required": draw(st.lists(st.sampled_from(listed), max_size=2, unique=True)),
        "additionalProperties": False,
        draw(st.sampled_from(["dependentRequired", "dependencies"])): deps,
    }
    if draw(st.booleans()):
        schema["maxProperties"] = draw(st.integers(0, 4))
    return schema


def _instances():
    for r in range(len(NAMES) + 1):
        for keys in itertools.combinations(NAMES, r):
            yield {k: 1 for k in keys}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas())
def test_every_subset_of_properties_agrees_with_jsonschema(schema):
    validator = (Draft7Validator if "dependencies" in schema else Draft202012Validator)(schema)
    valid = [i for i in _instances() if validator.is_valid(i)]
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e) and not valid
        return
    for inst in _instances():
        text = json.dumps(canonical_order(inst, schema))  # the default layout: json.dumps'
        assert accepts(g, text) == validator.is_valid(inst), (schema, inst)


def test_a_dependency_on_a_name_outside_properties_is_a_name_the_schema_states():
    schema = {"type": "object", "properties": {"a": {}}, "dependentRequired": {"a": ["zz"]}}
    for policy in ("spec", "explicit"):  # "zz" is generated with additionalProperties' value
        g = schema_to_grammar(schema, extra_properties=policy)
        assert accepts(g, '{"a": 1, "zz": 2}') and not accepts(g, '{"a": 1}') and accepts(g, '{"zz": 2}')
        assert accepts(g, '{"zz": 2, "q": 1}') == (policy == "spec")
    g = schema_to_grammar({**schema, "additionalProperties": False})  # then "a" can never appear
    assert accepts(g, "{}") and not accepts(g, '{"a": 1}')


def test_schema_form_dependencies_are_presence_conditionals():
    schema = {"type": "object", "properties": {"a": {}, "b": {}}, "dependencies": {"a": {"required": ["b"]}}}
    g = schema_to_grammar(schema)
    assert accepts(g, "{}") and accepts(g, '{"b": 1}') and accepts(g, '{"a": 1, "b": 2}') and not accepts(g, '{"a": 1}')
    with pytest.raises(SchemaError, match="/properties/a/not/format: keyword 'not'"):
        schema_to_grammar(
            {"type": "object", "dependentSchemas": {"a": {"properties": {"a": {"not": {"format": "email"}}}}}}
        )
