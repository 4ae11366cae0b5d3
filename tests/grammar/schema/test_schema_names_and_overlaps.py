"""Refusals turned into exact grammars: names a schema states outside `properties`
(dependentRequired, a negated propertyNames), exactly-one `oneOf` over closed object
branches and over branches told apart by patterns, one `anyOf` list met twice in an
`allOf`. Each against the `jsonschema` validator: no false accepts, generated samples valid."""

from __future__ import annotations

import itertools
import json
import os
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grammar.helpers import check_strings_against_jsonschema, duplicate_keys, sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar
from ministruct.grammar.schema.disjoint import _no_common_string

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["a", "b", "x", "y", "0"]
OBJECTS = [
    {n: v for n, v in zip(NAMES, vals) if v is not None}
    for vals in itertools.product([None, 1], [None, "s"], [None, 1], [None, True], [None, 2])
]
POOL = [None, 1, "x", [], [1], *OBJECTS]


def _agrees(schema: dict, extra_properties: str = "explicit") -> "object | None":
    """Compile `schema`: every value of POOL the grammar accepts is valid, and 20 samples
    are valid; returns the grammar (None when refused as accepting no value, which the
    pool must then agree with for the explicit policy's names)."""
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties=extra_properties)
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        assert not [v for v in POOL if validator.is_valid(v)] or extra_properties == "explicit", schema
        return None
    for v in POOL:
        text = json.dumps(canonical_order(v, schema))
        assert not accepts(g, text) or validator.is_valid(v), ("false accept", schema, v)
    for text in sample_strings(g, random.Random(0), count=20):
        if not duplicate_keys(text):
            assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)
    return g


# ------------------------------------------------------------ names stated outside properties

_DEPS = st.dictionaries(
    st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True), max_size=3
)


@SETTINGS
@given(
    _DEPS,
    st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    st.sampled_from([{}, {"a": {"type": "integer"}}, {"a": {}, "b": {"type": "string"}}]),
    st.sampled_from(["explicit", "spec"]),
)
def test_names_dependent_required_speaks_of_are_generated(deps, required, props, policy):
    """A name that dependentRequired asks for is one the schema states: objects may carry
    it (with additionalProperties' value), and the dependency holds exactly."""
    schema = {"type": "object", "properties": props, "required": required, "dependentRequired": deps}
    g = _agrees(schema, policy)
    if g is None:
        return
    validator = Draft202012Validator(schema)
    for v in OBJECTS:  # every valid object over the stated names is generated (in the explicit policy too)
        stated = set(props) | set(required) | {x for t, ns in deps.items() for x in [t, *ns]}
        if validator.is_valid(v) and set(v) <= stated:
            assert _in_some_order(g, v), ("false reject", schema, v)


def test_a_dependency_on_an_unlisted_name_is_generated_not_refused():
    schema = {
        "type": "object",
        "properties": {"shape": {"enum": ["circle", "square"]}, "radius": {"type": "number"}},
        "required": ["shape", "radius"],
        "dependentRequired": {"radius": ["unit"]},
    }
    for policy in ("explicit", "spec"):
        g = schema_to_grammar(schema, extra_properties=policy)
        assert accepts(g, '{"shape": "circle", "radius": 1, "unit": "cm"}')
        assert not accepts(g, '{"shape": "circle", "radius": 1}')
    g = schema_to_grammar({"dependentRequired": {"a": ["b"]}})  # (refused by pointer before)
    assert accepts(g, '{"a": 1, "b": 2}') and accepts(g, '{"b": 2}') and accepts(g, "3")
    assert not accepts(g, '{"a": 1}') and not accepts(g, '{"a": 1, "c": 2}')


_PN = st.sampled_from(
    [
        False,
        {"not": {"const": "x"}},
        {"not": {"enum": ["x", "y"]}},
        {"not": {"enum": ["0", "a"]}},
        {"not": {"type": "string", "const": "y"}},
    ]
)


@SETTINGS
@given(
    _PN,
    st.sampled_from([{}, {"properties": {"a": {"type": "integer"}}}, {"patternProperties": {"\\d": {"const": 2}}}]),
    st.sampled_from([{}, {"maxProperties": 1}, {"additionalProperties": {"type": "integer"}}]),
)
def test_a_negated_property_names_asks_for_a_name(pn, shape, extra):
    """`not: {propertyNames: S}`: some name fails S. Where S fails only listed names (or
    every name), one of them is there: exact, the names need not be in `properties`."""
    schema = {"type": "object", **shape, **extra, "not": {"propertyNames": pn}}
    g = _agrees(schema, "spec")
    assert g is not None or not [v for v in OBJECTS if Draft202012Validator(schema).is_valid(v)]
    if g is None:
        return
    for v in OBJECTS:  # and every valid object of the pool is accepted under the spec policy
        if Draft202012Validator(schema).is_valid(v):
            assert _in_some_order(g, v), ("false reject", schema, v)
    _agrees(schema, "explicit")


def _in_some_order(g, v) -> bool:
    """Does the grammar accept the value in some order of its objects' keys? (A name a
    rewrite asks for comes where its branch puts it, which canonical_order cannot know.)"""
    return any(accepts(g, json.dumps(x)) for x in _orders(v))


def _assert_exactly_one(g, branches: list, orders, seed: int) -> None:
    """Every POOL value `g` accepts (written as each of `orders(value)`) and every sample of
    `g` is valid under exactly one of `branches`."""
    checks = [Draft202012Validator(b) for b in branches]
    for v in POOL:
        for x in orders(v):
            if accepts(g, json.dumps(x)):
                assert sum(c.is_valid(v) for c in checks) == 1, (branches, v)
    for text in sample_strings(g, random.Random(seed), count=25):
        if not duplicate_keys(text):
            assert sum(c.is_valid(json.loads(text)) for c in checks) == 1, (branches, text)


def _orders(v) -> list:
    """The value with its objects' keys in every order (nested ones too)."""
    if isinstance(v, list):
        return [list(x) for x in itertools.product(*(_orders(i) for i in v))]
    if not isinstance(v, dict):
        return [v]
    out = []
    for keys in itertools.permutations(v):
        for vals in itertools.product(*(_orders(v[k]) for k in keys)):
            out.append(dict(zip(keys, vals)))
    return out


# ------------------------------------------------------------ exactly-one oneOf


def test_closed_branches_that_require_names_the_others_lack_need_no_negation():
    """Twenty operator branches, each an object of one required name: under the explicit
    policy each branch's objects carry that name only, so none is valid under another
    (exactly one holds), past the limit of the negation's product."""
    ops = [f"op{i}" for i in range(20)]
    schema = {
        "$defs": {"operand": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
        "oneOf": [{"type": "object", "required": [op], "properties": {op: {"$ref": "#/$defs/operand"}}} for op in ops],
    }
    g = schema_to_grammar(schema)
    validator = Draft202012Validator(schema)
    seen = set()
    for text in sample_strings(g, random.Random(3), count=80):
        value = json.loads(text)
        assert validator.is_valid(value), text
        seen |= set(value)
    assert len(seen) > 10
    assert accepts(g, '{"op3": [1, 2]}') and not accepts(g, '{"op3": [1], "op4": [2]}')
    # with additionalProperties stated, objects may carry other names: the negation stays
    open_schema = {**schema, "oneOf": [{**b, "additionalProperties": True} for b in schema["oneOf"][:3]]}
    g = schema_to_grammar(open_schema)
    assert not accepts(g, '{"op0": [1], "op1": [2]}')
    assert accepts(g, '{"op0": [1], "zz": 1}')


_BRANCH = st.builds(
    lambda req, props, closed: {
        "type": "object",
        "required": req,
        "properties": props,
        **({"additionalProperties": False} if closed else {}),
    },
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True),
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from([{}, {"type": "integer"}, {"const": 1}]), max_size=2),
    st.booleans(),
)


@SETTINGS
@given(st.lists(_BRANCH, min_size=2, max_size=4), st.sampled_from(["explicit", "spec"]))
def test_oneof_of_object_branches_is_exactly_one(branches, policy):
    schema = {"oneOf": branches}
    try:
        g = schema_to_grammar(schema, extra_properties=policy)
    except SchemaError as e:
        assert "accepts no value" in str(e) or "branches (the limit)" in str(e), e
        return
    _assert_exactly_one(g, branches, lambda v: [canonical_order(v, schema)], seed=2)


PATTERNS = ["^ALIAS$", "^BLANK$", "^A", "S$", "LI", "^[A-Z]+$", "\\d", "^\\d+$", "^(ab|cd)$", "b|c", "(?i)alias", "^$"]
STRINGS = ["", "ALIAS", "BLANK", "alias", "AS", "ab", "cd", "LI", "12", "a1", "ALIAS\n", "abc", "S", "A"]


@pytest.mark.parametrize("a,b", list(itertools.combinations(PATTERNS, 2)))
def test_patterns_proven_apart_share_no_string(a, b):
    """_no_common_string proves two patterns apart only when no string is found by both
    (checked with `re.search` on strings built from both patterns' pieces)."""
    if _no_common_string([a, b]):
        for s in STRINGS + [x + y for x in STRINGS for y in STRINGS]:
            assert not (re.search(a, s) and re.search(b, s)), (a, b, s)
    if (a, b) in (("^ALIAS$", "^BLANK$"), ("^\\d+$", "^(ab|cd)$")):
        assert _no_common_string([a, b])
    if (a, b) == ("^A", "S$"):
        assert not _no_common_string([a, b])


@SETTINGS
@given(st.lists(st.sampled_from(PATTERNS), min_size=2, max_size=4, unique=True), st.lists(st.sampled_from(STRINGS)))
def test_oneof_of_pattern_tagged_branches_is_exactly_one(patterns, tags):
    """Branches told apart by the pattern of a required `type` (a tree of rules, as
    grammar-description formats write it): exact, whether or not the patterns overlap."""
    branches = [
        {"type": "object", "required": ["type"], "properties": {"type": {"type": "string", "pattern": p}}}
        for p in patterns
    ]
    schema = {"oneOf": branches}
    checks = [Draft202012Validator(b) for b in branches]
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:
        assert "accepts no value" in str(e) or "branches (the limit)" in str(e), e
        return
    for t in tags:
        v = {"type": t}
        assert accepts(g, json.dumps(v)) == (sum(c.is_valid(v) for c in checks) == 1), (patterns, t)
    for text in sample_strings(g, random.Random(4), count=20):
        assert sum(c.is_valid(json.loads(text)) for c in checks) == 1, (patterns, text)


# ------------------------------------------------------------ one anyOf list met twice


def test_an_anyof_met_again_through_a_recursion_is_one_list():
    """An item schema whose `anyOf` is reached again through a recursion (an author with
    an image credited to authors): `a and a` is `a`, not a product past the limit."""
    schema = {
        "$defs": {
            "author": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "image": {"$ref": "#/$defs/image"}},
                "required": ["name"],
            },
            "ref": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "by": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/author"}, {"$ref": "#/$defs/ref"}]}},
            "image": {"type": "object", "properties": {"credits": {"$ref": "#/$defs/by"}}},
        },
        "allOf": [{"$ref": "#/$defs/by"}] * 8,
    }
    g = _agrees_with_samples(schema)
    assert accepts(g, '[{"name": "A", "image": {"credits": [{"id": "x"}]}}]')


def _agrees_with_samples(schema: dict):
    g = schema_to_grammar(schema)
    validator = Draft202012Validator(schema)
    for text in sample_strings(g, random.Random(5), count=30):
        assert validator.is_valid(json.loads(text)), text
    return g


# ------------------------------------------------------------ not of listed objects and arrays

_DEEP = st.recursive(
    st.sampled_from([None, 0, 1, "a", True]),
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), inner, max_size=2)
    ),
    max_leaves=4,
)
DEEP_POOL = [None, 0, 1, "a", {}, [], {"a": 1}, {"a": None}, {"b": "a"}, {"a": 1, "b": "a"}, {"a": {"a": 1}}]
DEEP_POOL += [[1], [None], ["a", 1], [1, "a"], [[1]], [{"a": 1}], {"a": [1]}, {"a": 1, "b": 0, "c": 1}, [1, 1, 1]]


@SETTINGS
@given(st.lists(_DEEP, min_size=1, max_size=3), st.sampled_from([{}, {"type": "object"}, {"type": ["array", "null"]}]))
def test_not_of_listed_objects_and_arrays_is_exact(values, typed):
    """`not: {enum: [...]}` with objects and arrays listed: member by member (another kind,
    a member missing or one more, a member of another value); under the spec policy every
    value of the pool that is not listed is generated, none that is."""
    schema = {**typed, "not": {"enum": values}}
    pool = DEEP_POOL + values
    validator = Draft202012Validator(schema)
    for policy in ("spec", "explicit"):
        try:
            g = schema_to_grammar(schema, extra_properties=policy)
        except SchemaError as e:
            assert "branches (the limit)" in str(e), e
            return
        for v in pool:
            if not validator.is_valid(v):  # in no order of its keys
                assert not _in_some_order(g, v), ("false accept", schema, v)
            if policy == "spec" and validator.is_valid(v):
                assert _in_some_order(g, v), ("false reject", schema, v)
        for text in sample_strings(g, random.Random(6), count=20):
            if not duplicate_keys(text):
                assert validator.is_valid(json.loads(text)), (schema, text)


# ------------------------------------------------------------ lookaheads after a leading ^

_LOOK = st.sampled_from(["a", "ab", ".*b", "[^a]*$", "\\d", "a|b", "(a)\\1".replace("\\1", "")])
_REST = st.sampled_from(["", ".*", "[a-c]+$", "a.*", "(ab|b)+", "[\\s\\S]*", "b?"])


@SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from("=!"), _LOOK), min_size=1, max_size=3),
    _REST,
    st.sampled_from(["", "(?i)"]),
    st.lists(st.text(st.sampled_from(list("abcAB1\n")), max_size=5), min_size=1, max_size=8),
)
def test_lookaheads_after_a_leading_caret_agree_with_jsonschema(looks, rest, flags, texts):
    """`^(?=A)(?!B)R`: the pattern `^R`, with `^A` and without `^B` (re.search, as the
    validator reads it), in `pattern`, beside another pattern and under `not`."""
    pattern = flags + "^" + "".join(f"(?{k}{x})" for k, x in looks) + rest
    check_strings_against_jsonschema({"type": "string", "pattern": pattern}, texts)
    check_strings_against_jsonschema({"type": "string", "allOf": [{"pattern": pattern}, {"pattern": "b"}]}, texts)
    check_strings_against_jsonschema({"type": "string", "not": {"pattern": pattern}}, texts)
    try:
        _agrees_with_samples({"type": "string", "pattern": pattern, "maxLength": 6})
    except SchemaError as e:  # (a pattern no string matches: check_strings_against_jsonschema agreed)
        assert "accepts no value" in str(e), e


@SETTINGS
@given(
    st.sampled_from(["", "^", "(?i)"]),
    st.sampled_from(["", "a", "((?:[^/]*/)*)", "[a-c]+", "x?"]),
    _LOOK,
    st.lists(st.text(st.sampled_from(list("abcAB1/\n")), max_size=5), min_size=1, max_size=8),
)
def test_a_lookahead_that_ends_the_pattern_agrees_with_jsonschema(start, rest, look, texts):
    """`R(?=X)`: re.search finds it where it finds `R(?:X)` (what follows a match is no part
    of it), in `pattern`, with length bounds and under `not`."""
    pattern = f"{start}{rest}(?={look})"
    check_strings_against_jsonschema({"type": "string", "pattern": pattern}, texts)
    check_strings_against_jsonschema({"type": "string", "pattern": pattern, "maxLength": 3}, texts)
    check_strings_against_jsonschema({"type": "string", "not": {"pattern": pattern}}, texts)


@pytest.mark.parametrize(
    "pattern",
    ["^a(?!b)", "(?!a)b", "^(?!a)b|c", "(?m)^(?!a)b", "^(?!a)*b", "^(?!a)b(?!c)", "a(?=b)(?=c)", "a(?=b)|c"],
)
def test_other_lookaheads_stay_refused_by_pointer(pattern):
    with pytest.raises(SchemaError, match="lookahead") as e:
        schema_to_grammar({"type": "object", "properties": {"p": {"type": "string", "pattern": pattern}}})
    assert e.value.pointer == "/properties/p/pattern"


@SETTINGS
@given(
    st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True), min_size=1, max_size=3),
    st.integers(0, 3),
    st.sampled_from(["anyOf", "oneOf"]),
    st.sampled_from(["explicit", "spec"]),
)
def test_branches_apart_by_how_many_names_they_need(required_sets, most, kw, policy):
    """A branch whose every case requires n names and one with at most fewer properties
    share no object (the fewest names through anyOf/oneOf): exactly one, each branch's own."""
    branches = [
        {"type": "object", kw: [{"required": r} for r in required_sets]},
        {"type": "object", "maxProperties": most, "additionalProperties": {"type": "integer"}},
    ]
    schema = {"oneOf": branches}
    try:
        g = schema_to_grammar(schema, extra_properties=policy)
    except SchemaError as e:
        assert "accepts no value" in str(e) or "branches (the limit)" in str(e), e
        return
    _assert_exactly_one(g, branches, _orders, seed=7)
