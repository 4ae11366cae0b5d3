"""patternProperties with additionalProperties other than false: exact against jsonschema.

Keys are drawn from a small alphabet that hits and misses the patterns; each instance
is serialized with json.dumps (listed properties first, as the grammar lays them out)
and the grammar must agree with Draft202012Validator on every one of them.
"""

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
from ministruct.grammar.regex.parse import parse_regex
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar
from ministruct.grammar.schema.complement import ComplementError, build_dfa, inline_rules

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 200))
PATTERN_SETS = [
    {"^x-": {"type": "string"}},
    {"[0-9]": {"type": "integer"}},
    {"^a.*z$": {"type": "boolean"}},
    {"^x-": {"type": "string"}, "[0-9]": {"type": "integer"}},
    {"^x-": {"type": ["string", "integer"]}, "[0-9]": {"type": "integer"}, "^a.*z$": {"type": ["integer", "boolean"]}},
    {"[0-9]": {"type": "integer", "minimum": 0}, "1$": {"type": "integer", "maximum": 5}},
    {"^x-": True, "z": {"type": "null"}},
]
ADDITIONAL = [None, True, {"type": "integer"}, {"type": "string"}, False]
PROPERTIES = [None, {"a1": {"type": "integer"}, "b": {"type": "string"}}]

SCHEMAS = []
for pats in PATTERN_SETS:
    for ap in ADDITIONAL:
        for props in PROPERTIES:
            s: dict = {"type": "object", "patternProperties": pats}
            if ap is not None:
                s["additionalProperties"] = ap
            if props is not None:
                s["properties"] = props
            SCHEMAS.append(s)
# propertyNames given as a pattern: one more condition on every key
for pats in PATTERN_SETS[3:5]:
    for ap in (None, {"type": "integer"}, False):
        s = {"type": "object", "patternProperties": pats, "propertyNames": {"pattern": "^[a-z0-9-]*$"}}
        if ap is not None:
            s["additionalProperties"] = ap
        SCHEMAS.append(s)
        SCHEMAS.append({**s, "properties": {"a1": {"type": "integer"}, "b\u00e9": True}})

KEYS = st.text(alphabet="ax-z1b0\u00e9\n", max_size=5)
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 9), st.sampled_from(["", "s", "x-"]), st.just([]), st.just({})
)
INSTANCES = st.dictionaries(KEYS, VALUES, max_size=4)

_grammars: dict[int, object] = {}


def _grammar(i: int):
    if i not in _grammars:
        _grammars[i] = schema_to_grammar(SCHEMAS[i], whitespace="flexible", extra_properties="spec")
    return _grammars[i]


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_compiles(i):
    _grammar(i)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(i=st.integers(0, len(SCHEMAS) - 1), inst=INSTANCES, escape=st.booleans())
def test_agrees_with_jsonschema(i, inst, escape):
    schema = SCHEMAS[i]
    g = _grammar(i)
    want = Draft202012Validator(schema).is_valid(inst)
    text = json.dumps(canonical_order(inst, schema), ensure_ascii=escape)
    assert accepts(g, text) == want, (schema, text)


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_escaped_keys_decoded(i):
    """Keys written with \\u escapes are judged on their decoded code points."""
    schema = SCHEMAS[i]
    g = _grammar(i)
    v = Draft202012Validator(schema)
    for key, val in [("x-", "s"), ("x-", 1), ("a1", 1), ("q", 2), ("az", True), ("q", "t")]:
        text = '{"' + "".join(f"\\u{ord(ch):04x}" for ch in key) + '": ' + json.dumps(val) + "}"
        if accepts(g, text):
            assert v.is_valid({key: val}), (schema, text)


def test_dfa_labels_match_re_search():
    import random
    import re

    pats = ["^x-", "[0-9]", "^a.*z$", "(ab|c){2,3}d?", "\\w+$", "^$"]
    comps = [inline_rules(parse_regex(f"[\\s\\S]*(?:{p})[\\s\\S]*")) for p in pats]
    d = build_dfa(comps)

    def label(s):
        q = 0
        for ch in s:
            q = next(t for rs, t in d.states[q] if any(a <= ord(ch) <= b for a, b in rs))
        return d.labels[q]

    rng = random.Random(0)
    for _ in range(3000):
        s = "".join(rng.choice("axz-0cbd \n_\u00e9") for _ in range(rng.randint(0, 7)))
        assert label(s) == frozenset(i for i, p in enumerate(pats) if re.search(p, s)), s


def test_state_limit_refuses():
    comps = [inline_rules(parse_regex(f"[\\s\\S]*(?:{p})[\\s\\S]*")) for p in ["a[\\s\\S]{12}$"]]
    with pytest.raises(ComplementError):
        build_dfa(comps, max_states=500)
    schema = {"type": "object", "patternProperties": {"a[\\s\\S]{14}$": {"type": "integer"}}}
    with pytest.raises(SchemaError, match="patternProperties"):
        schema_to_grammar(schema, extra_properties="spec")


# patternProperties in one allOf part, properties and additionalProperties in the other:
# the merge (schema/merge.py) must not apply that additionalProperties to the names the
# part lists, though the pattern matches them (`{"a1": 1}` under `[0-9]` and a strict part
# listing `a1` was once rejected)
MERGED = []
for pats in PATTERN_SETS[:5]:
    for ap in ADDITIONAL[2:]:
        strict = {"properties": {"a1": {"type": "integer"}, "x-b": True}, "additionalProperties": ap}
        MERGED.append({"type": "object", **strict, "allOf": [{"patternProperties": pats}]})
        MERGED.append({"type": "object", "patternProperties": pats, "allOf": [strict]})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    i=st.integers(0, len(MERGED) - 1),
    inst=st.dictionaries(st.one_of(st.sampled_from(["a1", "x-b"]), KEYS), VALUES, max_size=4),
)
def test_a_merged_pattern_leaves_the_listed_names_to_their_part(i, inst):
    schema = MERGED[i]
    try:
        g = schema_to_grammar(schema, whitespace="flexible", extra_properties="spec")
    except SchemaError as e:
        assert "cannot merge patternProperties" in str(e) or "in several parts" in str(e), e
        return
    want = Draft202012Validator(schema).is_valid(inst)
    text = json.dumps(canonical_order(inst, schema))
    assert accepts(g, text) == want, (schema, text)


def test_a_strict_part_keeps_its_listed_names_under_the_other_parts_pattern():
    schema = {
        "properties": {"a": True},
        "additionalProperties": False,
        "allOf": [{"patternProperties": {"^a": {"type": "integer"}}}],
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    assert accepts(g, '{"a":1}') and not accepts(g, '{"a":"s"}') and not accepts(g, '{"ab":1}')


# patternProperties and additionalProperties in several allOf parts that do not fold into one
# pair (a strict part without another's patterns): each part's patterns and extras kept apart
# (merge.KEY_PARTS), also merged again beside a union's branches
_PART = st.fixed_dictionaries(
    {},
    optional={
        "patternProperties": st.sampled_from(PATTERN_SETS),
        "additionalProperties": st.sampled_from(ADDITIONAL[1:]),
        "properties": st.sampled_from(PROPERTIES[1:] + [{"x-b": {"type": "integer"}}]),
    },
)
_AROUND = st.sampled_from(
    [
        {},
        {"required": ["a1"]},
        {"anyOf": [{"required": ["x-b"]}, {"maxProperties": 1}]},
        {"not": {"required": ["b"]}},
        {"not": {"patternProperties": {"^x-|1": {"type": "string"}}}},
    ]
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(_PART, min_size=2, max_size=3),
    around=_AROUND,
    insts=st.lists(
        st.dictionaries(st.one_of(st.sampled_from(["a1", "x-b", "b"]), KEYS), VALUES, max_size=4), max_size=25
    ),
    seed=st.integers(0, 2**16),
)
def test_patterns_and_extras_of_several_parts_agree_with_jsonschema(parts, around, insts, seed):
    schema = {"type": "object", "allOf": parts, **around}
    try:
        g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e) or "branches (the limit)" in str(e), e
        return
    validator = Draft202012Validator(schema)
    for inst in insts:
        text = json.dumps(canonical_order(inst, schema), separators=(",", ":"))
        got = accepts(g, text)
        if got or "anyOf" not in around:  # (a union's branch lists the name it asks for first)
            assert got == validator.is_valid(inst), (schema, text)
    for text in sample_strings(g, random.Random(seed), count=15):
        if not duplicate_keys(text):
            assert validator.is_valid(json.loads(text)), (schema, text)


def test_the_parts_of_a_merged_object_keep_their_own_extras():
    """A strict part without the other's pattern: its additionalProperties holds where its
    own patterns do not match, the other part's schema where the other's pattern does."""
    schema = {
        "allOf": [
            {"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True},
            {"patternProperties": {"a": True}, "additionalProperties": False},
        ],
        "minProperties": 1,
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    assert accepts(g, '{"aaaa":1}') and accepts(g, '{"bbbba":[]}')
    assert not accepts(g, '{"aa":1}') and not accepts(g, '{"bbbb":1}') and not accepts(g, "{}")


# patterns with lookaheads right after a leading ^ sort keys too (lookaheads.split_lookaheads:
# the rest found, each (?=A) found, each (?!B) not)
LOOKAHEAD_PATTERNS = ["^(?!x-).*$", "^(?!a1$)[a-z0-9]+$", "^(?=a)(?!az)", "^(?=.*1)x", "^(?!b$)"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pats=st.lists(st.sampled_from(LOOKAHEAD_PATTERNS + ["^x-", "[0-9]"]), min_size=1, max_size=3, unique=True),
    kinds=st.lists(st.sampled_from([{"type": "integer"}, {"type": "string"}, True, False]), min_size=3, max_size=3),
    ap=st.sampled_from(ADDITIONAL),
    inst=st.dictionaries(st.one_of(st.sampled_from(["a1", "x-b", "b", "az", "pattern"]), KEYS), VALUES, max_size=4),
)
def test_pattern_properties_with_lookaheads_agree_with_jsonschema(pats, kinds, ap, inst):
    schema: dict = {"type": "object", "patternProperties": dict(zip(pats, kinds)), "properties": {"b": True}}
    if ap is not None:
        schema["additionalProperties"] = ap
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    text = json.dumps(canonical_order(inst, schema), separators=(",", ":"))
    assert accepts(g, text) == Draft202012Validator(schema).is_valid(inst), (schema, text)


# propertyNames that lists names (enum, const) or is reached through a $ref, beside patterns
# and listed properties: one more component of the key automaton
_NAMES_SCHEMAS = [
    {"enum": ["a1", "x-b", "zz", 3]},
    {"type": "string", "const": "x-1"},
    {"$ref": "#/$defs/key"},
    {"$ref": "#/$defs/keys"},
]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pn=st.sampled_from(_NAMES_SCHEMAS),
    pats=st.sampled_from([{}, *PATTERN_SETS[:4]]),
    ap=st.sampled_from(ADDITIONAL),
    props=st.sampled_from(PROPERTIES),
    inst=st.dictionaries(st.one_of(st.sampled_from(["a1", "x-b", "zz", "x-1", "b"]), KEYS), VALUES, max_size=4),
)
def test_property_names_listed_or_referenced_agree_with_jsonschema(pn, pats, ap, props, inst):
    schema: dict = {
        "type": "object",
        "propertyNames": pn,
        "$defs": {"key": {"type": "string", "pattern": "^[a-z]\\d$"}, "keys": {"enum": ["b", "a1"]}},
    }
    for k, v in (("patternProperties", pats), ("additionalProperties", ap), ("properties", props)):
        if v:
            schema[k] = v
    try:
        g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        assert not Draft202012Validator(schema).is_valid(inst) or not inst, (schema, inst)
        return
    text = json.dumps(canonical_order(inst, schema), separators=(",", ":"))
    assert accepts(g, text) == Draft202012Validator(schema).is_valid(inst), (schema, text)
