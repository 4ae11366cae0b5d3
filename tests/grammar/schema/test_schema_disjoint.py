"""The oneOf disjointness test: every proof holds against the jsonschema validator (hypothesis),
and the proofs real schemas need are found."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.disjoint import Disjointness
from ministruct.grammar.schema.merge import Resolver


def _disjoint(a, b, rest=None, defs=None) -> bool:
    root = {"$defs": defs or {}}
    validator = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
    resolver = Resolver(root, lambda msg, ptr, kw=None: SchemaError(msg, pointer=ptr, keyword=kw))
    return Disjointness(resolver, lambda: validator).disjoint(a, b, rest or {})


PROVEN = [
    ({"type": "string"}, {"type": "integer"}, None),
    ({"const": "a"}, {"enum": ["b", "c"]}, None),
    ({"enum": [1, 2]}, {"type": "string"}, None),
    ({"maximum": 2}, {"exclusiveMinimum": 2}, {"type": "number"}),
    ({"type": "integer", "exclusiveMinimum": 1}, {"type": "integer", "exclusiveMaximum": 2}, None),
    ({"type": "string", "maxLength": 3}, {"type": "string", "minLength": 4}, None),
    # each requires a property the other forbids (Github_hard---o29813)
    (
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"src": {}, "replaceWith": {}},
            "required": ["src", "replaceWith"],
        },
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {"replace": {}, "with": {}},
            "required": ["replace", "with"],
        },
        None,
    ),
    # a discriminator both require, behind $ref
    ({"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}, None),
    (
        {"type": "array", "minItems": 1, "prefixItems": [{"const": "x"}]},
        {"type": "array", "minItems": 1, "items": {"type": "number"}},
        None,
    ),
    (
        {"properties": {"kind": {"const": 1}}},
        {"properties": {"kind": {"const": 2}}},
        {"type": "object", "required": ["kind"]},
    ),
    # a branch that is a oneOf (through $ref) apart from each of its branches
    ({"type": "string"}, {"oneOf": [{"$ref": "#/$defs/cat"}, {"type": "integer"}]}, None),
    # closed objects whose names (listed, or found by patterns) are apart, one name at least
    (
        {"type": "object", "patternProperties": {"^[0-9.]+x$": {}}, "additionalProperties": False, "minProperties": 1},
        {"type": "object", "patternProperties": {"^[a-z]{2}$": {}}, "additionalProperties": False},
        None,
    ),
    (
        {"type": "object", "required": ["size"], "properties": {"size": {}}, "additionalProperties": False},
        {"type": "object", "patternProperties": {"^[a-z]{2,3}$": {}}, "additionalProperties": False},
        None,
    ),
]
DEFS = {
    "cat": {"type": "object", "required": ["kind"], "properties": {"kind": {"const": "cat"}}},
    "dog": {"type": "object", "required": ["kind", "bark"], "properties": {"kind": {"enum": ["dog", "wolf"]}}},
}
OVERLAPPING = [
    ({"type": "integer"}, {"minimum": 2}, None),
    ({"maximum": 2}, {"maximum": 5}, None),
    ({"required": ["a"]}, {"required": ["b"]}, None),  # "x" satisfies both: required is about objects
    ({"type": "object", "required": ["a"]}, {"type": "object", "required": ["b"]}, None),
    ({"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "array"}}, None),  # []
    ({"enum": [1, "a"]}, {"type": "string"}, None),
    ({"type": "string"}, {"anyOf": [{"type": "integer"}, {"maxLength": 2}]}, None),
    (  # {} is in both: no name is needed
        {"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False},
        {"type": "object", "patternProperties": {"^y": {}}, "additionalProperties": False},
        None,
    ),
    (  # "ab" is found by both patterns
        {"type": "object", "patternProperties": {"^a": {}}, "additionalProperties": False, "minProperties": 1},
        {"type": "object", "patternProperties": {"b$": {}}, "additionalProperties": False},
        None,
    ),
]


@pytest.mark.parametrize("a, b, rest", PROVEN)
def test_disjoint_branches_are_proven(a, b, rest):
    assert _disjoint(a, b, rest, DEFS) and _disjoint(b, a, rest, DEFS)


@pytest.mark.parametrize("a, b, rest", OVERLAPPING)
def test_overlapping_branches_are_not(a, b, rest):
    assert not _disjoint(a, b, rest, DEFS) and not _disjoint(b, a, rest, DEFS)


def test_disjoint_oneof_compiles_and_overlap_is_exactly_one():
    schema_to_grammar({"$defs": DEFS, "oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}]})
    g = schema_to_grammar({"type": "integer", "oneOf": [{"maximum": 2}, {"maximum": 5}]})
    assert [x for x in range(-2, 9) if accepts(g, str(x))] == [3, 4, 5]
    with pytest.raises(SchemaError, match="'oneOf'.*branches 0 and 1 may overlap"):
        schema_to_grammar({"oneOf": [{"format": "date"}, {"maxLength": 5}]})


# ---------------------------------------------------------------- property: proofs are sound

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 2.5, -1.5]),
    st.sampled_from(["", "a", "ab", "abc", "abcd"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
    max_leaves=6,
)
_TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]


@st.composite
def _schemas(draw, depth=0):
    s: dict = {}
    if draw(st.booleans()):
        types = draw(st.lists(st.sampled_from(_TYPES), min_size=1, max_size=3, unique=True))
        s["type"] = types[0] if len(types) == 1 else types
    if draw(st.integers(0, 4)) == 0:
        vals = draw(st.lists(_SCALARS, min_size=1, max_size=3))
        if len(vals) == 1 and draw(st.booleans()):
            s["const"] = vals[0]
        else:
            s["enum"] = vals
    for key in draw(
        st.lists(
            st.sampled_from(
                [
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum",
                    "minLength",
                    "maxLength",
                    "minItems",
                    "maxItems",
                    "minProperties",
                    "maxProperties",
                ]
            ),
            max_size=2,
            unique=True,
        )
    ):
        s[key] = (
            draw(st.integers(0, 3))
            if "Length" in key or "Items" in key or "Properties" in key
            else draw(st.sampled_from([-1, 0, 0.5, 1, 2]))
        )
    if depth < 2 and draw(st.booleans()):
        names = draw(st.lists(st.sampled_from("abc"), max_size=2, unique=True))
        s["properties"] = {n: draw(_schemas(depth + 1)) for n in names}
        s["required"] = draw(st.lists(st.sampled_from("abc"), max_size=2, unique=True))
        if draw(st.booleans()):
            s["additionalProperties"] = draw(st.sampled_from([False, {"type": "integer"}]))
        if draw(st.integers(0, 2)) == 0:
            pats = draw(st.lists(st.sampled_from(["^a", "[bc]", "^[0-9]", "c$", "^(a|b)$"]), max_size=2, unique=True))
            s["patternProperties"] = {p: draw(_schemas(depth + 1)) for p in pats}
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        s[draw(st.sampled_from(["anyOf", "oneOf"]))] = draw(st.lists(_schemas(depth + 1), min_size=1, max_size=3))
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            s["prefixItems"] = [draw(_schemas(depth + 1))]
        s["items"] = draw(_schemas(depth + 1))
    if depth < 2 and draw(st.integers(0, 4)) == 0:
        s = {"allOf": [s, draw(_schemas(depth + 1))]}
    return s


def _pool() -> list:
    """About 900 small JSON values: every shape the generated schemas can tell apart."""
    scalars = [None, True, False, -1, 0, 1, 2, 3, 0.5, 2.5, -1.5, "", "a", "abc", "abcd"]
    small = [None, 0, 1, 2, 0.5, "a", "abc", [], {}]
    arrays = [[]] + [[x] for x in scalars + [[], [1], {}]] + [[x, y] for x in small for y in small]
    objects = [{}]
    for keys in (["a"], ["b"], ["c"], ["a", "b"], ["a", "c"], ["b", "c"], ["a", "b", "c"]):
        combos = [{}]
        for k in keys:
            combos = [{**c, k: v} for c in combos for v in (small if len(keys) < 3 else small[:5])]
        objects += combos
    return scalars + arrays + objects


_POOL = _pool()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas(), _schemas(), st.one_of(st.just({}), _schemas()), st.lists(_VALUES, max_size=4))
def test_a_proof_of_disjointness_is_never_contradicted(a, b, rest, values):
    if not _disjoint(a, b, rest):
        return
    both = Draft202012Validator({"allOf": [rest, a, b]}, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for v in _POOL + values:
        assert not both.is_valid(v), (a, b, rest, v)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.builds(lambda v: {"const": v}, _SCALARS),
            st.builds(lambda vs: {"enum": vs}, st.lists(_SCALARS, min_size=1, max_size=3)),
        ),
        min_size=2,
        max_size=6,
    )
)
def test_value_only_branches_take_the_one_pass_path_with_the_same_answer(branches):
    root: dict = {}
    validator = Draft202012Validator(root)
    d = Disjointness(
        Resolver(root, lambda msg, ptr, kw=None: SchemaError(msg, pointer=ptr, keyword=kw)), lambda: validator
    )
    pairwise = all(d.disjoint(a, b, {}) for i, a in enumerate(branches) for b in branches[i + 1 :])
    assert (d.first_overlap(branches, {}) is None) == pairwise


def test_many_listed_branches_compile():
    schema_to_grammar({"oneOf": [{"const": f"v{i}", "title": f"value {i}"} for i in range(3000)]})
    g = schema_to_grammar({"oneOf": [{"const": 1}, {"const": 2}, {"enum": [3, 1.0]}]})
    assert [x for x in range(5) if accepts(g, str(x))] == [2, 3]  # 1 is valid under two branches


def test_refs_under_a_nested_id_are_not_read_from_the_wrong_base():
    # inside "sub", #/$defs/a is sub's own integer definition, not the root's string one
    schema = {
        "$defs": {
            "a": {"type": "string"},
            "sub": {
                "$id": "https://example.com/sub",
                "$defs": {"a": {"type": "integer"}},
                "oneOf": [{"$ref": "#/$defs/a"}, {"type": "integer"}],
            },
        },
        "$ref": "#/$defs/sub",
    }
    with pytest.raises(SchemaError, match="may overlap"):
        schema_to_grammar(schema)


def test_bounds_beyond_floats_are_compared_exactly():
    assert _disjoint({"type": "integer", "minimum": 10**400}, {"type": "integer", "maximum": 10**400 - 1})
    assert not _disjoint({"type": "integer", "minimum": 10**400}, {"type": "integer", "maximum": 10**400 + 5})


_BRANCHES = st.one_of(
    st.builds(lambda v: {"const": v}, _SCALARS),
    st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 2}, {"type": "array"}]),
    st.builds(
        lambda vals, extra: {"type": "object", "required": ["a"], "properties": {"a": {"enum": vals}, **extra}},
        st.lists(_SCALARS, min_size=1, max_size=2),
        st.sampled_from([{}, {"b": {"type": "integer"}}]),
    ),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_BRANCHES, min_size=2, max_size=6))
def test_first_overlap_none_means_no_instance_fits_two_branches(branches):
    root: dict = {}
    validator = Draft202012Validator(root)
    d = Disjointness(
        Resolver(root, lambda msg, ptr, kw=None: SchemaError(msg, pointer=ptr, keyword=kw)), lambda: validator
    )
    if d.first_overlap(branches, {}) is not None:
        return
    checks = [Draft202012Validator(b) for b in branches]
    for v in _POOL:
        assert sum(c.is_valid(v) for c in checks) <= 1, (branches, v)
