"""`unevaluatedProperties` / `unevaluatedItems` (schema/unevaluated.py) against the
jsonschema validator: on random schemas that mix them with in-place applicators (allOf,
anyOf, oneOf, if/then/else, dependentSchemas, not, $ref), every value of a pool the
grammar accepts is valid, every valid one is accepted (JSON Schema's own meaning of extra
properties: exact), and random strings of the grammar in the default generation language
are valid instances."""

from __future__ import annotations

import itertools
import json
import os
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grammar.helpers import duplicate_keys, sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.unevaluated import without_unevaluated

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], phases=list(Phase)[:4]
)

_VALUES = [None, 1, "x"]
OBJECTS = [
    {k: v for k, v in zip("abc", vals) if v is not None} for vals in itertools.product(_VALUES + [None], repeat=3)
]
ARRAYS = [list(x) for n in range(4) for x in itertools.product([1, "a", None], repeat=n)]
POOL = [None, 0, "a", True] + OBJECTS + ARRAYS
# refusals these shapes may meet, all by pointer: merges the compiler does not make, limits
REFUSALS = ("cannot merge", "in several parts", "(the limit)", "too many", "is not enforced", "cannot be enforced")

_VALUE_SCHEMA = st.sampled_from([True, False, {"type": "integer"}, {"type": "string"}, {"const": 1}])
_NAME = st.sampled_from("abc")


def _object_atoms() -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda n, s: {"properties": {n: s}}, _NAME, _VALUE_SCHEMA),
        st.builds(lambda p, s: {"patternProperties": {p: s}}, st.sampled_from(["^a", "b|c"]), _VALUE_SCHEMA),
        st.builds(lambda s: {"additionalProperties": s}, _VALUE_SCHEMA),
        st.builds(lambda ns: {"required": ns}, st.lists(_NAME, min_size=1, max_size=2, unique=True)),
        st.builds(lambda s: {"unevaluatedProperties": s}, _VALUE_SCHEMA),
        st.just({"type": "object"}),
        st.just({"minProperties": 2}),
    )


def _array_atoms() -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda xs: {"prefixItems": xs}, st.lists(_VALUE_SCHEMA, min_size=1, max_size=3)),
        st.builds(lambda s: {"items": s}, _VALUE_SCHEMA),
        st.builds(lambda s: {"contains": s}, st.sampled_from([{"type": "string"}, {"const": 1}])),
        st.builds(lambda s: {"unevaluatedItems": s}, _VALUE_SCHEMA),
        st.just({"type": "array"}),
        st.just({"minItems": 2}),
    )


def _schemas(atoms: st.SearchStrategy, depth: int) -> st.SearchStrategy:
    if depth == 0:
        return atoms
    inner = _schemas(atoms, depth - 1)
    return st.one_of(
        atoms,
        st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda i, t: {"if": i, "then": t}, inner, inner),
        st.builds(lambda i, t, e: {"if": i, "then": t, "else": e}, inner, inner, inner),
        st.builds(lambda n, x: {"dependentSchemas": {n: x}}, _NAME, inner),
        st.builds(lambda x: {"not": x}, inner),
    )


def _check(schema: dict) -> None:
    validator = Draft202012Validator(schema)
    try:
        exact = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        msg = str(e)
        assert " at /" in msg and "\n" not in msg, msg
        if "accepts no value" in msg or "no finite value" in msg:
            try:  # (or a restriction of the logic rewrites, see below: the plain schema's too)
                plain_g = schema_to_grammar(_true_unevaluated(schema), extra_properties="spec")
            except SchemaError:
                return
            assert not [v for v in POOL if validator.is_valid(v) and _accepted(plain_g, v)], schema
            return
        assert any(r in msg for r in REFUSALS), msg
        return
    plain = _plain_accepts(schema)
    for v in POOL:
        got, valid = _accepted(exact, v), validator.is_valid(v)
        assert not got or valid, ("false accept", schema, v)
        # the one restriction allowed is the logic rewrites' (not, if, oneOf, dependentSchemas)
        # on names the schema does not list under JSON Schema's extra properties
        # (schema/logic.py): the schema with its unevaluated* keywords true rejects the value too
        assert got or not valid or not plain(v) or _unlisted_under_logic(schema, v), ("false reject", schema, v)
    try:
        g = schema_to_grammar(schema)  # the generation language (explicit extra properties)
    except SchemaError as e:
        assert "accepts no value" in str(e) or "no finite value" in str(e), str(e)
        return
    for text in sample_strings(g, random.Random(0), count=20):
        if duplicate_keys(text):  # not prevented among additional properties (compiler.py says so)
            continue
        assert validator.is_valid(json.loads(text)), ("generated an invalid instance", schema, text)


def _unlisted_under_logic(schema: dict, value: object) -> bool:
    """Is `value` an object with a name that a negation's schema (a node with not, oneOf,
    if or dependentSchemas) and the nodes around it do not list in `properties`? The logic
    rewrites' documented restriction (schema/logic.py: a way of failing that depends on names
    the surrounding schema does not list generates only the listed names) may then reject
    it, also through a case of the unevaluated* rewrite that needs that negation (an anyOf
    branch valid through a oneOf whose other branch must fail on that name)."""
    if not isinstance(value, dict):
        return False

    def walk(x: object, listed: frozenset) -> bool:
        if isinstance(x, list):
            return any(walk(v, listed) for v in x)
        if not isinstance(x, dict):
            return False
        if isinstance(x.get("properties"), dict):
            listed = listed | set(x["properties"])
        if any(k in x for k in ("not", "oneOf", "if", "dependentSchemas")) and any(k not in listed for k in value):
            return True
        return any(walk(v, listed) for v in x.values())

    return walk(schema, frozenset())


def _plain_accepts(schema: dict):
    """Does the grammar of `schema` with every unevaluated* keyword true accept a value?"""
    plain = _true_unevaluated(schema)
    try:
        g = schema_to_grammar(plain, extra_properties="spec")
    except SchemaError:
        return lambda v: False
    return lambda v: _accepted(g, v)


def _accepted(g, v) -> bool:
    """Does `g` accept `v` written with its keys in some order? (The grammar fixes one
    order per case of the schema; canonical_order guesses it, and a guess is no oracle.)"""
    if isinstance(v, dict):
        return any(accepts(g, json.dumps(dict(p))) for p in itertools.permutations(v.items()))
    return accepts(g, json.dumps(v))


def _true_unevaluated(schema: dict) -> dict:
    """`schema` with its own unevaluated* keywords true (nested ones are kept: the same
    rewrites, so the same restrictions, apply to both)."""
    return {k: True if k in ("unevaluatedProperties", "unevaluatedItems") else v for k, v in schema.items()}


@SETTINGS
@given(_schemas(_object_atoms(), 2), _VALUE_SCHEMA, st.booleans(), st.booleans())
def test_unevaluated_properties_agree_with_jsonschema(sub, u, own, via_ref):
    schema = {"properties": {"a": {"type": "integer"}}, **sub} if own else dict(sub)
    if "unevaluatedProperties" in schema:
        schema = {"allOf": [schema]}
    if via_ref:  # what a $ref's target evaluates counts
        schema = {"$ref": "#/$defs/d", "$defs": {"d": schema}}
    _check({**schema, "unevaluatedProperties": u})


@SETTINGS
@given(_schemas(_array_atoms(), 2), _VALUE_SCHEMA, st.booleans(), st.booleans())
def test_unevaluated_items_agree_with_jsonschema(sub, u, own, via_ref):
    schema = {"prefixItems": [{"type": "integer"}], **sub} if own else dict(sub)
    if "unevaluatedItems" in schema:
        schema = {"allOf": [schema]}
    if via_ref:
        schema = {"$ref": "#/$defs/d", "$defs": {"d": schema}}
    _check({**schema, "unevaluatedItems": u})


def test_what_each_anyof_branch_evaluates_is_its_own():
    """The properties a valid anyOf branch evaluates are allowed, whichever branches hold;
    a name no valid branch evaluates is not."""
    schema = {
        "anyOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"b": {"type": "string"}}}],
        "unevaluatedProperties": False,
    }
    g = schema_to_grammar(schema, extra_properties="spec", whitespace="compact")
    for text, ok in [
        ('{"a":1}', True),
        ('{"b":"x"}', True),
        ('{"a":1,"b":"x"}', True),
        ('{"a":1,"b":2}', True),  # `b` fails its branch: unevaluated... but the first branch holds
        ('{"a":"x","b":"x"}', True),
        ('{"c":1}', False),
        ('{"a":1,"c":1}', False),
    ]:
        valid = Draft202012Validator(schema).is_valid(json.loads(text))
        assert accepts(g, text) is valid, text
        if text != '{"a":1,"b":2}' and text != '{"a":"x","b":"x"}':
            assert valid is ok, text


def test_contains_evaluates_the_items_it_matches():
    schema = {"contains": {"type": "string"}, "unevaluatedItems": {"type": "integer"}}
    g = schema_to_grammar(schema, whitespace="compact")
    assert accepts(g, '["a",1,"b"]') and not accepts(g, '["a",null]') and not accepts(g, "[1]")


def test_a_dynamic_ref_beside_unevaluated_is_refused_by_pointer():
    schema = {
        "$defs": {"x": {"$dynamicRef": "#m", "unevaluatedProperties": False}, "m": {"$dynamicAnchor": "m"}},
        "$ref": "#/$defs/x",
    }
    with pytest.raises(SchemaError) as ei:
        without_unevaluated(schema)
    assert ei.value.pointer == "/$defs/x" and ei.value.keyword == "unevaluatedProperties"


def test_the_rewrite_keeps_the_documents_pointers():
    """Only the keyword goes and one allOf entry is appended: `$ref`s into the document
    (allOf/0, $defs) still reach what they did."""
    schema = {
        "allOf": [{"properties": {"a": {"type": "integer"}}}],
        "$defs": {"d": {"type": "string"}},
        "properties": {"b": {"$ref": "#/$defs/d"}, "c": {"$ref": "#/allOf/0"}},
        "unevaluatedProperties": False,
    }
    out = without_unevaluated(schema)
    assert out["allOf"][0] == schema["allOf"][0] and out["$defs"] == schema["$defs"]
    assert "unevaluatedProperties" not in out and len(out["allOf"]) == 2
    assert "unevaluatedProperties" in schema  # the caller's schema is not changed


def test_patterns_of_parts_merge_where_the_strict_part_lists_them_all():
    """allOf parts with patternProperties merge exactly when the part with a strict
    additionalProperties lists every part's patterns (the shape the rewrite makes)."""
    schema = {"patternProperties": {"^a": {"type": "integer"}}, "unevaluatedProperties": False}
    g = schema_to_grammar(schema, extra_properties="spec", whitespace="compact")
    for text in ('{"ab":1}', '{"ab":"x"}', '{"b":1}', "{}", '{"a":1,"ax":2}'):
        assert accepts(g, text) is Draft202012Validator(schema).is_valid(json.loads(text)), text


def test_two_oneofs_in_allof_are_exactly_one_pair():
    schema = {"allOf": [{"oneOf": [{"type": "integer"}, {"minimum": 2}]}, {"oneOf": [{"maximum": 5}, {"const": 1}]}]}
    g = schema_to_grammar(schema, whitespace="compact")
    for v in range(-2, 9):
        assert accepts(g, json.dumps(v)) is Draft202012Validator(schema).is_valid(v), v


def test_lenient_drops_what_cannot_be_rewritten_with_a_warning():
    schema = {
        "$defs": {"x": {"$dynamicRef": "#m"}, "m": {"$dynamicAnchor": "m"}},
        "allOf": [{"$ref": "#/$defs/x"}],
        "unevaluatedProperties": False,
    }
    with pytest.raises(SchemaError):
        schema_to_grammar(schema)
    g = schema_to_grammar(schema, lenient=True)
    assert any("unevaluatedProperties" in w and "(lenient)" in w for w in g.warnings), g.warnings
