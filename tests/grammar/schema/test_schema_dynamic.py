"""`$dynamicRef` / `$dynamicAnchor` (schema/dynamic.py) against the jsonschema validator:
random extensible schemas (a generic list or tree whose items are a `$dynamicRef`, and a
root that overrides the anchor, or not, or with a plain `$anchor`), where every value of a
pool the grammar accepts is valid, every valid one is accepted, and random strings of
the grammar are valid instances."""

from __future__ import annotations

import itertools
import json
import os
import random

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grammar.helpers import sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar

EXAMPLES = int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 120))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow], phases=list(Phase)[:4]
)
ITEMS = [None, 1, "a", True, {}, {"x": 1}, {"children": []}, {"children": [1]}, {"children": [{"children": []}]}]
POOL = [list(x) for n in range(3) for x in itertools.product(ITEMS, repeat=n)] + ITEMS
_ITEM = st.sampled_from(
    [{}, {"type": "integer"}, {"type": "string"}, {"type": "object"}, {"enum": [1, "a"]}, {"not": {"type": "null"}}]
)


def _tree(item: dict) -> dict:
    """An object whose `children` are items of the dynamic anchor (a tree when it is one)."""
    return {"type": "object", "properties": {"children": {"type": "array", "items": {"$dynamicRef": "#node"}}}, **item}


@st.composite
def _schemas(draw):
    default, override = draw(_ITEM), draw(_ITEM)
    tree = draw(st.booleans())
    generic = {
        "$id": "generic",
        "type": "array",
        "items": {"$dynamicRef": "#node"},
        "$defs": {"node": {"$dynamicAnchor": "node", **(_tree(default) if tree else default)}},
    }
    how = draw(st.sampled_from(["dynamic", "plain anchor", "none", "intermediate"]))
    root: dict = {"$id": "https://example.com/root", "$defs": {"generic": generic}}
    if how == "dynamic":
        root["$defs"]["mine"] = {"$dynamicAnchor": "node", **(_tree(override) if tree else override)}
    elif how == "plain anchor":  # an $anchor of the name is not a dynamic anchor
        root["$defs"]["mine"] = {"$anchor": "node", **override}
    if how == "intermediate":  # a resource between without the anchor changes nothing
        root["$defs"]["middle"] = {"$id": "middle", "$ref": "generic"}
        root["$ref"] = "middle"
    else:
        root["$ref"] = "generic"
    if draw(st.booleans()):  # a keyword beside the $ref: the compiler merges the chain of $refs
        root["minItems"] = 0
    return root


def _check(schema: dict) -> None:
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties="spec", whitespace="compact")
    except SchemaError as e:
        if "$dynamicRef" in str(e):  # reached through a rewrite's merged parts (a `not` beside it)
            assert e.pointer.endswith("/$dynamicRef") and "not" in json.dumps(schema), str(e)
            return
        assert "accepts no" in str(e) and not [v for v in POOL if validator.is_valid(v)], str(e)
        return
    for v in POOL:
        got = accepts(g, json.dumps(v, separators=(",", ":")))
        assert got is validator.is_valid(v), (schema, v, got)
    for text in sample_strings(schema_to_grammar(schema), random.Random(0), count=20):
        assert validator.is_valid(json.loads(text)), (schema, text)


@SETTINGS
@given(_schemas())
def test_dynamic_refs_agree_with_jsonschema(schema):
    _check(schema)


def test_the_outermost_anchor_wins_and_each_scope_is_compiled_apart():
    """The same generic list reached from two resources: items are each resource's own."""
    generic = {
        "$id": "generic",
        "type": "array",
        "items": {"$dynamicRef": "#t"},
        "$defs": {"d": {"$dynamicAnchor": "t"}},
    }
    schema = {
        "$id": "https://example.com/root",
        "type": "object",
        "properties": {"ints": {"$ref": "ints"}, "strs": {"$ref": "strs"}},
        "$defs": {
            "generic": generic,
            "ints": {"$id": "ints", "$ref": "generic", "$defs": {"t": {"$dynamicAnchor": "t", "type": "integer"}}},
            "strs": {"$id": "strs", "$ref": "generic", "$defs": {"t": {"$dynamicAnchor": "t", "type": "string"}}},
        },
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    v = Draft202012Validator(schema)
    for value in ({"ints": [1], "strs": ["a"]}, {"ints": ["a"]}, {"strs": [1]}, {"ints": [1, 2], "strs": []}):
        assert accepts(g, json.dumps(value, separators=(",", ":"))) is v.is_valid(value), value


def test_a_dynamic_ref_beside_other_keywords_is_merged_with_its_target():
    schema = {
        "$id": "https://example.com/root",
        "$defs": {"a": {"$dynamicAnchor": "a", "type": "string"}},
        "items": {"$dynamicRef": "#a", "minLength": 2},
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    v = Draft202012Validator(schema)
    for value in (["ab"], ["a"], [1], [], ["abc", "de"]):
        assert accepts(g, json.dumps(value, separators=(",", ":"))) is v.is_valid(value), value


def test_resources_passed_by_a_merged_chain_of_refs_enter_the_scope():
    """A $ref with a keyword beside it is merged with its target, and the target's $ref
    with its own: the resources on that chain are in the dynamic scope all the same."""
    schema = {
        "$id": "https://example.com/root",
        "$ref": "numbers",
        "maxItems": 3,
        "$defs": {
            "generic": {
                "$id": "generic",
                "type": "array",
                "items": {"$dynamicRef": "#t"},
                "$defs": {"d": {"$dynamicAnchor": "t"}},
            },
            "numbers": {
                "$id": "numbers",
                "$ref": "generic",
                "$defs": {"t": {"$dynamicAnchor": "t", "type": "integer"}},
            },
        },
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    v = Draft202012Validator(schema)
    for value in ([1, 2], ["a"], [], [1, 2, 3, 4], [None]):
        assert accepts(g, json.dumps(value, separators=(",", ":"))) is v.is_valid(value), value
