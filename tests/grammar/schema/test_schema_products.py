"""Unions that stay small: a failing `{required: [n], properties: {n: S}}` is one branch
("n, if there, fails S"), and an option already among a conjunction's parts adds nothing,
so exactly-one `oneOf` over many one-property branches, or over allOf'ed lists of steps,
compiles within the branch limit. Against `jsonschema`: no false accepts (in every key
order), samples valid, exactly one branch; integers checked both ways by brute force."""

from __future__ import annotations

import itertools
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
from ministruct.grammar.schema.compiler import schema_to_grammar

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["a", "b", "c", "d"]
VALUES = [None, 1, "x", True, [], [1], {}, {"v": 1}, {"v": "s"}]
SUBS = [
    {},
    {"type": "integer"},
    {"type": "string"},
    {"type": "object", "required": ["v"], "properties": {"v": {"type": "integer"}}, "additionalProperties": False},
    {"type": "array", "items": {"type": "integer"}},
    {"enum": [1, "x"]},
]


def _objects(names: list[str]) -> list[dict]:
    """Every object over `names` with values from VALUES (at most two names present)."""
    out = [{}]
    for k in (1, 2):
        for keys in itertools.combinations(names, k):
            for vals in itertools.product(VALUES, repeat=k):
                out.append(dict(zip(keys, vals)))
    return out


def _accepts_some_order(g, v: dict) -> bool:
    return any(accepts(g, json.dumps(dict(zip(keys, (v[k] for k in keys))))) for keys in itertools.permutations(v))


def test_many_one_property_branches_each_minus_the_others_is_one_branch():
    """Twelve branches `{required: [op_i], properties: {op_i: S_i}}` of objects that list every
    op (an assertion vocabulary): branch i minus the others was 2**11 ways to fail them;
    each other branch fails in one way (op_j, if there, fails S_j), so it compiles, exactly one."""
    ops = [f"op{i}" for i in range(12)]
    subs = [SUBS[i % len(SUBS)] or {"type": "boolean"} for i in range(12)]
    schema = {
        "type": "object",
        "properties": {**dict.fromkeys(ops, True), "note": {"type": "string"}},
        "additionalProperties": False,
        "oneOf": [{"required": [op], "properties": {op: s}} for op, s in zip(ops, subs)],
    }
    g = schema_to_grammar(schema)
    validator = Draft202012Validator(schema)
    branches = [Draft202012Validator(b) for b in schema["oneOf"]]
    seen = set()
    for text in sample_strings(g, random.Random(5), count=60):
        value = json.loads(text)
        assert validator.is_valid(value), text
        assert sum(b.is_valid(value) for b in branches) == 1, text
        seen |= set(value) - {"note"}
    assert len(seen) > 4
    assert accepts(g, '{"op1": 3}') and accepts(g, '{"op1": 3, "op2": 5}')  # op2 fails its string
    assert not accepts(g, '{"op1": 3, "op2": "s"}') and not accepts(g, '{"note": "n"}')


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(SUBS)), min_size=2, max_size=4),
    st.sampled_from([{}, {"additionalProperties": False}, {"properties": {"a": {"type": "integer"}}}]),
    st.sampled_from(["explicit", "spec"]),
)
def test_oneof_of_one_property_branches_is_exactly_one(branches, around, policy):
    """Random branches `{required: [n], properties: {n: S}}`: every object the grammar accepts
    (in any key order) is valid under exactly one branch, and so is every sample."""
    one_of = [{"type": "object", "required": [n], "properties": {n: s}} for n, s in branches]
    schema = {"type": "object", **around, "oneOf": one_of}
    if around.get("additionalProperties") is False:
        schema["properties"] = dict.fromkeys(NAMES, True)
    try:
        g = schema_to_grammar(schema, extra_properties=policy)
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        return
    validator = Draft202012Validator(schema)
    checks = [Draft202012Validator(b) for b in one_of]
    for v in _objects(NAMES):
        if _accepts_some_order(g, v):
            assert validator.is_valid(v), ("false accept", schema, v)
            assert sum(c.is_valid(v) for c in checks) == 1, (schema, v)
    for text in sample_strings(g, random.Random(1), count=20):
        if not duplicate_keys(text):
            assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)


_STEP = st.sampled_from([2, 3, 4, 5, 6, 7, 8, 11, 12, 24])
_PART = st.one_of(
    st.builds(lambda m: {"multipleOf": m}, _STEP),
    st.builds(lambda m: {"not": {"multipleOf": m}}, _STEP),
    st.builds(lambda a, b: {"allOf": [{"not": {"multipleOf": a}}, {"not": {"multipleOf": b}}]}, _STEP, _STEP),
)


@SETTINGS
@given(
    st.lists(st.lists(_PART, min_size=2, max_size=3), min_size=1, max_size=3),
    st.sampled_from(["oneOf", "anyOf"]),
    st.integers(-200, 200),
)
def test_allof_of_step_lists_agrees_with_jsonschema_on_every_integer(lists, kw, lo):
    """`allOf` of several oneOf (or anyOf) lists of steps and their negations (the lists
    repeat options: each met once is a part of every conjunction after it): both ways on
    every integer in the bounds."""
    schema = {"type": "integer", "minimum": lo, "maximum": lo + 400, "allOf": [{kw: xs} for xs in lists]}
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, whitespace="compact")
    except SchemaError as e:
        if "(the limit)" in str(e):  # a union past its bound: refused by the allOf's pointer, naming the keyword
            assert e.pointer == "/allOf" and e.keyword in ("oneOf", "anyOf"), e
            return
        assert "accepts no value" in str(e), e
        assert not any(validator.is_valid(x) for x in range(lo, lo + 401)), schema
        return
    for x in range(lo, lo + 401):
        assert accepts(g, str(x)) == validator.is_valid(x), (schema, x)


_TAGGED = [{"type": "object", "properties": {"a": {"const": x}}, "required": ["a"]} for x in (1, "x")]
_BRANCH = st.sampled_from(SUBS + _TAGGED + [{"type": "object", "properties": {"a": False}}])


@SETTINGS
@given(st.lists(st.lists(_BRANCH, min_size=1, max_size=4), min_size=2, max_size=3), st.sampled_from(["oneOf", "anyOf"]))
def test_allof_of_branch_lists_agrees_with_jsonschema(lists, kw):
    """`allOf` of several oneOf (or anyOf) lists of branches of all kinds (pairs of kinds
    that do not meet are left out; for anyOf, a branch both lists hold is one option):
    both ways on every value that is not an
    object, no false accept of an object in any key order, samples valid."""
    schema = {"allOf": [{kw: xs} for xs in lists]}
    validator = Draft202012Validator(schema)
    values = VALUES + _objects(["a", "v"])
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        assert not any(validator.is_valid(v) for v in values), schema
        return
    for v in values:
        if isinstance(v, dict):  # (a negation speaks of listed names only: a restriction, never a loosening)
            assert not _accepts_some_order(g, v) or validator.is_valid(v), ("false accept", schema, v)
        else:
            assert accepts(g, json.dumps(v)) == validator.is_valid(v), (schema, v)
    for text in sample_strings(g, random.Random(2), count=20):
        if not duplicate_keys(text):
            assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)


def test_a_refused_product_of_allof_lists_names_the_allof():
    """The oneOf a merge makes of an allOf's lists has no place in the schema: a refusal
    past its limit names the allOf (found by hypothesis: it named '/oneOf/26')."""
    steps = [
        [{"multipleOf": 2}, {"multipleOf": 4}, {"multipleOf": 6}],
        [{"multipleOf": 2}, {"allOf": [{"not": {"multipleOf": 2}}, {"not": {"multipleOf": 2}}]}, {"multipleOf": 5}],
        [{"multipleOf": 3}, {"allOf": [{"not": {"multipleOf": 3}}, {"not": {"multipleOf": 3}}]}, {"multipleOf": 5}],
    ]
    schema = {"type": "integer", "minimum": 0, "maximum": 400, "allOf": [{"oneOf": xs} for xs in steps]}
    with pytest.raises(SchemaError) as info:
        schema_to_grammar(schema, whitespace="compact")
    assert info.value.pointer == "/allOf" and info.value.keyword == "oneOf"
    assert "combinations of the allOf's lists" in str(info.value)
