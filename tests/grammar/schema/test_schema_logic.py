"""`not`, `if`/`then`/`else`, `dependentSchemas`/`dependencies` and exactly-one `oneOf`
(schema/logic.py) against the jsonschema validator: on random schemas of each shape, every
value of a pool the grammar accepts is valid (no false accepts), every valid one is
accepted (exact: the pool's objects carry only listed names, and a number that is not an
integer is the one restriction), and random strings of the grammar are valid instances."""

from __future__ import annotations

import itertools
import json
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator, Draft202012Validator

from grammar.helpers import duplicate_keys, sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar
from ministruct.grammar.schema.contains import MAX_COUNTED
from ministruct.grammar.schema.logic import MAX_BRANCHES

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PROPS = {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}}
_A, _B, _C = [None, 0, 1, 2, 5], [None, "", "a", "ab"], [None, 1, "x"]
OBJECTS = [
    {k: v for k, v in zip("abc", vals) if v is not None} for vals in itertools.product(_A, _B, _C)
]  # every combination of present names and small values
SCALARS = [None, True, False, 0, 1, 2, 3, -1, 2.5, "", "a", "ab", "ba", "b", [], [1], ["a"], [1, "a"], [1, 1]]
POOL = SCALARS + OBJECTS


def _atoms() -> st.SearchStrategy:
    name = st.sampled_from("abc")
    return st.one_of(
        st.builds(lambda ns: {"required": ns}, st.lists(name, min_size=1, max_size=2, unique=True)),
        st.builds(lambda n, v: {"properties": {n: {"const": v}}}, name, st.sampled_from([0, 1, "a", "ab", 1, None])),
        st.builds(
            lambda n, vs: {"properties": {n: {"enum": vs}}},
            name,
            st.lists(st.sampled_from([0, 2, "a"]), min_size=1, max_size=2),
        ),
        st.builds(lambda m: {"properties": {"a": {"minimum": m}}}, st.integers(0, 3)),
        st.builds(lambda t: {"type": t}, st.sampled_from(["object", "string", "integer", "number", "array", "null"])),
        st.builds(
            lambda vs: {"enum": vs}, st.lists(st.sampled_from([0, 1, "a", None, True, 2.5]), min_size=1, max_size=3)
        ),
        st.builds(lambda m: {"minimum": m}, st.integers(0, 3)),
        st.builds(lambda m: {"exclusiveMaximum": m}, st.integers(0, 3)),
        st.builds(lambda m: {"maxLength": m}, st.integers(0, 2)),
        st.builds(lambda m: {"minProperties": m}, st.integers(1, 2)),
        st.builds(lambda m: {"maxProperties": m}, st.integers(0, 2)),
        st.builds(lambda m: {"minItems": m}, st.integers(1, 2)),
        st.builds(lambda p: {"pattern": p}, st.sampled_from(["a", "^b", "b$"])),
        st.builds(lambda n, m: {"dependentRequired": {n: [m]}}, name, name),
        st.just({"items": {"type": "integer"}}),
        st.just({"contains": {"type": "integer"}}),
        st.just({"contains": {"const": 1}, "maxContains": 1}),
        st.just({"prefixItems": [{"type": "integer"}]}),
        st.just({"additionalProperties": False, "properties": {"a": {}}}),
    )


def _schemas(depth: int = 2) -> st.SearchStrategy:
    if depth == 0:
        return _atoms()
    inner = _schemas(depth - 1)
    return st.one_of(
        _atoms(),
        st.builds(lambda x: {"not": x}, inner),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, inner, inner, inner),
        st.builds(lambda n, x: {"dependentSchemas": {n: x}}, st.sampled_from("abc"), inner),
    )


def _wrap(shape: dict, typed: bool) -> dict:
    """The shape inside an object schema listing a, b, c (or over every type of value)."""
    return {"type": "object", "properties": PROPS, **shape} if typed else {"properties": PROPS, **shape}


def _check(schema: dict, validator=None) -> None:
    validator = validator or Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:
        msg = str(e)
        if "accepts no value" in msg:
            assert not [v for v in POOL if validator.is_valid(v) and v != 2.5], schema
            return
        # refused in these shapes: a union past the limit, allOf parts that do not merge (two
        # different `pattern`s; `contains` of more allOf parts than contains.MAX_COUNTED)
        assert (
            "branches (the limit)" in msg
            or "cannot merge two different" in msg
            or f"of more than {MAX_COUNTED} allOf parts together" in msg
        ), msg
        return
    for v in POOL:
        text = json.dumps(canonical_order(v, schema))
        got, valid = accepts(g, text), validator.is_valid(v)
        assert not got or valid, ("false accept", schema, v)
        if valid and not got:
            assert isinstance(v, float) or (isinstance(v, list) and len(v) > 1), ("false reject", schema, v)
    rng = random.Random(0)
    for text in sample_strings(g, rng, count=20):
        if duplicate_keys(text):  # not prevented among additional properties (compiler.py says so)
            continue
        assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)


@SETTINGS
@given(_schemas(), st.booleans())
def test_not_agrees_with_jsonschema(sub, typed):
    _check(_wrap({"not": sub}, typed))


@SETTINGS
@given(_schemas(1), _schemas(1), _schemas(1), st.booleans())
def test_if_then_else_agrees_with_jsonschema(i, t, e, typed):
    _check(_wrap({"if": i, "then": t, "else": e}, typed))


@SETTINGS
@given(st.dictionaries(st.sampled_from("abc"), _schemas(1), min_size=1, max_size=2), st.booleans())
def test_dependent_schemas_agree_with_jsonschema(deps, typed):
    _check(_wrap({"dependentSchemas": deps}, typed))
    if not any(k in json.dumps(deps) for k in ("dependent", "prefixItems")):  # draft 7 spells them otherwise
        _check(_wrap({"dependencies": deps}, typed), Draft7Validator(_wrap({"dependencies": deps}, typed)))


@SETTINGS
@given(st.lists(_schemas(1), min_size=2, max_size=4), st.booleans())
def test_oneof_is_exactly_one(branches, typed):
    _check(_wrap({"oneOf": branches}, typed))


_OBJECT_BRANCH = st.builds(
    lambda req, const, extra: {
        "type": "object",
        "required": req,
        **({"properties": {"c": {"const": const}}} if const is not None else {}),
        **extra,
    },
    st.lists(st.sampled_from("abc"), min_size=0, max_size=2, unique=True),
    st.sampled_from([None, 1, "x"]),
    st.sampled_from([{}, {"additionalProperties": False, "properties": {"a": {}, "b": {}, "c": {}}}]),
)


@SETTINGS
@given(st.lists(_OBJECT_BRANCH, min_size=2, max_size=4))
def test_overlapping_object_branches_generate_each_branchs_own_values(branches):
    """Object branches told apart by which names appear and by a constant: each generated
    value is valid under exactly one branch, and each branch with values of its own gets some."""
    schema = {"type": "object", "properties": PROPS, "oneOf": branches}
    checks = [Draft202012Validator({"allOf": [{"type": "object", "properties": PROPS}, b]}) for b in branches]
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:  # e.g. two equal branches: nothing is valid under exactly one
        assert "accepts no value" in str(e) and all(sum(c.is_valid(v) for c in checks) != 1 for v in OBJECTS)
        return
    seen = set()
    for v in OBJECTS:
        hits = [i for i, c in enumerate(checks) if c.is_valid(v)]
        text = json.dumps(canonical_order(v, schema))
        assert accepts(g, text) == (len(hits) == 1), (branches, v, hits)
        if len(hits) == 1:
            seen.add(hits[0])
    for text in sample_strings(g, random.Random(1), count=30):
        assert sum(c.is_valid(json.loads(text)) for c in checks) == 1, (branches, text)
    assert seen or not any(accepts(g, json.dumps(v)) for v in OBJECTS)


ARRAYS = [list(x) for n in range(4) for x in itertools.product([1, 2, "a", None], repeat=n)]
_ITEM = st.sampled_from([True, {"type": "integer"}, {"const": 1}, {"enum": [1, "a"]}, {"not": {"const": 2}}])


@SETTINGS
@given(
    _ITEM,
    st.sampled_from([None, True, {"type": "integer"}, {"not": {"type": "null"}}]),
    st.lists(_ITEM, max_size=2),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(0, 4)),
    st.one_of(st.none(), st.integers(1, 4)),
)
def test_contains_counts_exactly(contains, items, prefix, lo, hi, min_items, max_items):
    schema: dict = {"type": "array", "contains": contains, "minContains": lo}
    for k, v in (("maxContains", hi), ("minItems", min_items), ("maxItems", max_items)):
        if v is not None:
            schema[k] = v
    if items is not None:
        schema["items"] = items
    if prefix:
        schema["prefixItems"] = prefix
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e) and not any(validator.is_valid(v) for v in ARRAYS), schema
        return
    for v in ARRAYS:
        assert accepts(g, json.dumps(v)) == validator.is_valid(v), (schema, v)
    for text in sample_strings(g, random.Random(2), count=20):
        assert validator.is_valid(json.loads(text)), (schema, text)


def test_discriminated_conditionals_stay_small():
    """if/then chains on one property's value (one per case, in allOf) compile within the
    branch limit: the cases that cannot hold together are dropped as the union is built."""
    cases = [f"k{i}" for i in range(12)]
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": cases}, "x": {"type": "integer"}, "y": {"type": "string"}},
        "required": ["kind"],
        "allOf": [
            {"if": {"properties": {"kind": {"const": k}}}, "then": {"required": ["x"] if i % 2 else ["y"]}}
            for i, k in enumerate(cases)
        ],
    }
    g = schema_to_grammar(schema)
    validator = Draft202012Validator(schema)
    for k in cases:
        for extra in ({"x": 1}, {"y": "s"}, {}):
            v = {"kind": k, **extra}
            assert accepts(g, json.dumps(v)) == validator.is_valid(v), v


def test_a_union_past_the_limit_is_refused_by_pointer():
    # (each branch fails in two ways: n, if there, below 1; or n2 absent)
    branches = [{"type": "object", "required": [n, n + "2"], "properties": {n: {"minimum": 1}}} for n in "abcdefgh"]
    schema = {"type": "object", "not": {"anyOf": [{"oneOf": branches}, {"minProperties": 9}]}}
    with pytest.raises(SchemaError, match=f"at /not.*more than {MAX_BRANCHES} branches"):
        schema_to_grammar(schema)


def test_lenient_drops_what_cannot_be_negated_and_says_so():
    schema = {"type": "string", "not": {"format": "email"}, "maxLength": 3}
    with pytest.raises(SchemaError, match="at /not/format: keyword 'not'"):
        schema_to_grammar(schema)
    g = schema_to_grammar(schema, lenient=True)
    assert any("/not/format" in w and "ignored (lenient)" in w for w in g.warnings)
    assert accepts(g, '"abc"') and not accepts(g, '"abcd"')


@SETTINGS
@given(
    st.sampled_from(
        [
            {"enum": [1, 2, "a"]},
            {"type": "boolean"},
            {"enum": [1, 1.0, None, "a"]},
            {"const": 2},
            {"enum": [1, 2, 3, 4]},
        ]
    ),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 4)),
)
def test_unique_items_over_listed_values_is_exact(items, min_items, max_items):
    schema: dict = {"type": "array", "items": items, "uniqueItems": True, "minItems": min_items}
    if max_items is not None:
        schema["maxItems"] = max_items
    validator = Draft202012Validator(schema)
    pool = [list(x) for n in range(5) for x in itertools.product([1, 2, "a", None, True, False], repeat=n)]
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:
        assert "accepts no value" in str(e) and not any(validator.is_valid(v) for v in pool), schema
        return
    for v in pool:
        assert accepts(g, json.dumps(v)) == validator.is_valid(v), (schema, v)
    for text in sample_strings(g, random.Random(3), count=20):
        assert validator.is_valid(json.loads(text)), (schema, text)


def test_unique_items_over_free_strings_stays_refused_by_pointer():
    with pytest.raises(SchemaError, match="at /properties/tags/uniqueItems"):
        schema_to_grammar({"properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}})
