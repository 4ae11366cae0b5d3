"""The generation language (extra_properties="explicit") against JSON Schema's meaning
("spec"): a table of schema shapes x policy, each row saying which texts the grammar
takes; everything either policy accepts must be a valid instance (the validator says)."""

from __future__ import annotations

import functools
import json
import random

import pytest
from jsonschema import Draft202012Validator, validators

from grammar.helpers import sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError, UsageError
from ministruct.grammar.schema import schema_to_grammar

D7 = "http://json-schema.org/draft-07/schema#"
PROPS = {"a": {"type": "integer"}, "b": {"type": "string"}}
compact_grammar = functools.partial(schema_to_grammar, whitespace="compact")  # the texts below are compact

# (name, schema, text, accepted under explicit, accepted under spec)
TABLE = [
    ("named only", {"type": "object", "properties": PROPS}, '{"a":1,"zz":2}', False, True),
    ("named only, no extras", {"type": "object", "properties": PROPS}, '{"a":1,"b":"x"}', True, True),
    ("required only", {"type": "object", "required": ["a"]}, '{"a":1,"zz":2}', False, True),
    ("required not listed", {"type": "object", "properties": PROPS, "required": ["c"]}, '{"c":[1]}', True, True),
    (
        "additionalProperties true",
        {"type": "object", "properties": PROPS, "additionalProperties": True},
        '{"a":1,"zz":2}',
        True,
        True,
    ),
    (
        "additionalProperties schema",
        {"type": "object", "properties": PROPS, "additionalProperties": {"type": "integer"}},
        '{"a":1,"zz":2}',
        True,
        True,
    ),
    (
        "additionalProperties schema, wrong type",
        {"type": "object", "properties": PROPS, "additionalProperties": {"type": "integer"}},
        '{"a":1,"zz":"x"}',
        False,
        False,
    ),
    (
        "additionalProperties false",
        {"type": "object", "properties": PROPS, "additionalProperties": False},
        '{"a":1,"zz":2}',
        False,
        False,
    ),
    (
        "patternProperties key",
        {"type": "object", "properties": PROPS, "patternProperties": {"^x": {"type": "integer"}}},
        '{"a":1,"x1":2}',
        True,
        True,
    ),
    (
        "patternProperties other key",
        {"type": "object", "properties": PROPS, "patternProperties": {"^x": {"type": "integer"}}},
        '{"a":1,"zz":2}',
        False,
        True,
    ),
    ("bare object names nothing", {"type": "object"}, '{"zz":2}', True, True),
    (
        "minProperties beyond the names",
        {"type": "object", "properties": {"a": {}}, "minProperties": 2},
        '{"a":1,"zz":2}',
        True,
        True,
    ),
    (
        "nested object",
        {"type": "object", "properties": {"o": {"type": "object", "properties": PROPS}}},
        '{"o":{"a":1,"zz":2}}',
        False,
        True,
    ),
    (
        "prefixItems, no items",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        '[1,"x",3]',
        False,
        True,
    ),
    (
        "prefixItems, the tuple",
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        '[1,"x"]',
        True,
        True,
    ),
    (
        "prefixItems with items",
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "integer"}},
        "[1,2,3]",
        True,
        True,
    ),
    (
        "prefixItems, minItems beyond",
        {"type": "array", "prefixItems": [{"type": "integer"}], "minItems": 2},
        "[1,2]",
        True,
        True,
    ),
    ("draft-07 tuple", {"$schema": D7, "type": "array", "items": [{"type": "integer"}]}, "[1,2]", False, True),
    (
        "draft-07 tuple, additionalItems",
        {"$schema": D7, "type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "integer"}},
        "[1,2]",
        True,
        True,
    ),
    ("plain items", {"type": "array", "items": {"type": "integer"}}, "[1,2,3]", True, True),
]


DUPLICATE = object()


def _no_duplicates(pairs: list) -> object:
    keys = [k for k, _ in pairs]
    return DUPLICATE if len(set(keys)) < len(keys) or DUPLICATE in [v for _, v in pairs] else dict(pairs)


def validator_of(schema: dict):
    return validators.validator_for(schema, default=Draft202012Validator)(schema)


@pytest.mark.parametrize("name,schema,text,explicit,spec", TABLE, ids=[r[0] for r in TABLE])
def test_policy_table(name, schema, text, explicit, spec):
    assert accepts(compact_grammar(schema, extra_properties="explicit"), text) == explicit
    assert accepts(compact_grammar(schema, extra_properties="spec"), text) == spec
    if explicit or spec:
        assert validator_of(schema).is_valid(json.loads(text))


def test_explicit_is_the_library_default():
    g = schema_to_grammar({"type": "object", "properties": PROPS})
    assert accepts(g, '{"a": 1}') and not accepts(g, '{"a": 1, "zz": 2}')


@pytest.mark.parametrize("name,schema", [(r[0], r[1]) for r in TABLE], ids=[r[0] for r in TABLE])
def test_every_generated_string_is_a_valid_instance(name, schema):
    validator = validator_of(schema)
    for policy in ("explicit", "spec"):
        g = compact_grammar(schema, extra_properties=policy)
        for text in sample_strings(g, random.Random(7), count=40):
            value = json.loads(text, object_pairs_hook=_no_duplicates)
            if value is DUPLICATE:
                continue  # documented in compiler.py: duplicate additional keys are not prevented
            assert validator.is_valid(value), (policy, text)


def test_unevaluated_properties_false_is_enforced_by_generating_nothing_unnamed():
    schema = {"type": "object", "properties": PROPS, "unevaluatedProperties": False}
    g = compact_grammar(schema, extra_properties="explicit")
    assert accepts(g, '{"a":1,"b":"x"}') and not accepts(g, '{"a":1,"zz":2}')
    spec = compact_grammar(schema, extra_properties="spec")  # exact either way (schema/unevaluated.py)
    assert accepts(spec, '{"a":1,"b":"x"}') and not accepts(spec, '{"a":1,"zz":2}')
    # a required name that `properties` does not list is left unevaluated: nothing is valid
    with pytest.raises(SchemaError, match="accepts no value"):
        compact_grammar({**schema, "required": ["c"]}, extra_properties="explicit")


def test_unknown_policy_is_refused():
    with pytest.raises(UsageError, match="extra_properties"):
        compact_grammar({"type": "object"}, extra_properties="loose")


def test_a_key_outside_the_names_goes_on_in_one_configuration_wherever_it_left_them():
    """A key that leaves the listed names, after any prefix of them, continues in one and
    the same configuration (one table row, one walk for the rest of it), and the names
    themselves still lead elsewhere."""
    from ministruct.engine.automaton import Automaton

    schema = {"type": "object", "properties": {"alpha": {}, "alps": {}, "beta": {}}, "additionalProperties": True}
    auto = Automaton(compact_grammar(schema))
    start = auto.step_bytes(frozenset({(auto.start[auto.grammar.root],)}), b'{"')
    rests = {auto.step_bytes(start, key) for key in (b"x", b"ax", b"alx", b"alpx", b"bex", b"alphx")}
    assert len(rests) == 1
    assert auto.step_bytes(start, b"alpha") not in rests


def test_a_key_leaves_the_names_by_a_wide_character_or_an_escape_on_one_shared_path():
    """The ways out of the names that do not depend on where they leave (the first byte of
    a non-ASCII character, a backslash) reach one configuration from every trie node: their
    byte paths are built, and their table rows filled, once."""
    from ministruct.engine.automaton import Automaton

    schema = {"type": "object", "properties": {"alpha": {}, "alps": {}, "beta": {}}, "additionalProperties": True}
    auto = Automaton(compact_grammar(schema))
    start = auto.step_bytes(frozenset({(auto.start[auto.grammar.root],)}), b'{"')
    for way_out in ("é".encode()[:1], "€".encode()[:2], b"\\", b"\\u00"):
        reached = {auto.step_bytes(start, prefix + way_out) for prefix in (b"", b"a", b"al", b"alp", b"be", b"alpha")}
        assert len(reached) == 1, way_out
        assert all(reached)


def test_objects_with_other_names_share_the_ways_out_of_their_names():
    """Every object of a schema that excludes its own names from its additional keys
    shares one rule for the rest of a key and one per way out (a wide character, an
    escape): a schema of many such objects is built and stepped once for them."""
    extra = {"additionalProperties": {"type": "integer"}}
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"name": {"type": "string"}}, **extra},
            "b": {"type": "object", "properties": {"nose": {"type": "string"}, "id": {}}, **extra},
        },
    }
    g = schema_to_grammar(schema)
    assert sorted(n for n in g.rules if n.startswith(("key", "other"))) == [
        "key-escape", "key-rest", "key-wide", "other-key", "other-key-2",
    ]  # fmt: skip
    for text, ok in (('{"a": {"x": 1}, "b": {"name": 2}}', True), ('{"a": {"name": 1}}', False)):
        assert accepts(g, text) == ok, text
