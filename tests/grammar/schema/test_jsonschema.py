"""Per-keyword checks of schema_to_grammar against the `jsonschema` validator.

Instances come from hypothesis (JSON values drawn near each schema's edges); the text
is `json.dumps` in the matching layout after `canonical_order`. The grammar must never
accept an invalid instance; valid instances drawn here are in canonical form (no
exponents, no integral floats, no escapes the grammar does not write) and must all be
accepted.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.ir import format_expr
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

FORMATS = Draft202012Validator.FORMAT_CHECKER


def dump(value, ws: str) -> str:
    if ws == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if ws == "pretty":
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-300, 300),
    st.integers(-(10**30), 10**30),
    st.integers(-(10**6), 10**6).map(lambda x: x / 1000).filter(lambda f: not f.is_integer()),
    st.text(alphabet=st.sampled_from(list('abcxyzAZ09 _-.:@/"\\\n\té€😀')), max_size=12),
    st.sampled_from(
        [
            "2024-02-29",
            "2023-02-29",
            "2023-13-01",
            "1999-12-31",
            "a@b.co",
            "192.168.0.1",
            "256.1.1.1",
            "::1",
            "12:30:00Z",
            "comer",
            "abc",
            "ABC",
            "zz",
            "3f2504e0-4f89-11d3-9a0c-0305e82c3301",
        ]
    ),
)
keys = st.sampled_from(["a", "b", "c", "name", "x", "é", "a b"])
values = st.recursive(
    scalars, lambda ch: st.lists(ch, max_size=4) | st.dictionaries(keys, ch, max_size=4), max_leaves=8
)

SCHEMAS = {
    "type-list": {"type": ["integer", "null"]},
    "properties": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"],
    },
    "additional-false": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "additionalProperties": False,
    },
    "additional-schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    },
    "required-unlisted": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": {"type": ["integer", "string"]},
    },
    "min-max-properties": {"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 1, "maxProperties": 2},
    "enum": {"enum": ["abc", 1, None, [1, 2], {"a": 1}]},
    "const": {"const": {"x": [1, "é"]}},
    "anyOf": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 0}]},
    "oneOf-disjoint": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
    "allOf": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"properties": {"a": {"minimum": 0}, "b": {"type": "string"}}},
        ]
    },
    "ref-recursive": {
        "$defs": {
            "t": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/t"}]}, "maxItems": 3}
        },
        "$ref": "#/$defs/t",
    },
    "pattern": {"type": "string", "pattern": "^[a-c]+$"},
    "pattern-search": {"type": "string", "pattern": "b|z"},
    "pattern-length": {"type": "string", "pattern": "^[a-zA-Z]*$", "minLength": 2, "maxLength": 3},
    "lengths": {"type": "string", "minLength": 1, "maxLength": 3},
    "format-date": {"type": "string", "format": "date"},
    "format-ipv4": {"type": "string", "format": "ipv4"},
    "format-email": {"type": "string", "format": "email"},
    "format-uuid": {"type": "string", "format": "uuid"},
    "int-range": {"type": "integer", "minimum": -17, "exclusiveMaximum": 250},
    "int-big": {"type": "integer", "minimum": 10**20, "maximum": 10**25},
    "number-range": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25},
    "multipleOf": {"type": "integer", "multipleOf": 7},
    "multipleOf-range": {"type": "integer", "multipleOf": 3, "minimum": 0, "maximum": 100},
    "array-bounds": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    "prefixItems": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    "propertyNames": {"type": "object", "propertyNames": {"pattern": "^[a-c]$"}},
    "patternProperties": {
        "type": "object",
        "patternProperties": {"^x": {"type": "integer"}},
        "additionalProperties": False,
    },
    "true": True,
    "nested-any": {"type": "object", "properties": {"a": {"type": "array"}}},
}


def _edge_values(schema) -> st.SearchStrategy:
    """Instances of the schema's own constants mixed with generic values."""
    found = []

    def walk(s):
        if isinstance(s, dict):
            for k, v in s.items():
                if k in ("enum",):
                    found.extend(v)
                elif k == "const":
                    found.append(v)
                else:
                    walk(v)
        elif isinstance(s, list):
            for v in s:
                walk(v)

    walk(schema)
    return st.one_of(values, st.sampled_from(found)) if found else values


CASES = [(name, ws) for name in SCHEMAS for ws in ("compact", "spaced", "flexible", "pretty")]


@pytest.mark.parametrize("name,ws", CASES)
def test_keyword_against_validator(name, ws):
    schema = SCHEMAS[name]
    grammar = schema_to_grammar(schema, whitespace=ws, extra_properties="spec")
    validator = Draft202012Validator(schema, format_checker=FORMATS)

    @settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(_edge_values(schema))
    def check(value):
        text = dump(canonical_order(value, schema), ws)
        got = accepts(grammar, text)
        valid = validator.is_valid(value)
        assert not (got and not valid), f"false accept: {text!r}"
        assert got == valid, f"false reject: {text!r}"

    check()


VALID_EXAMPLES = {
    "properties": [{"a": 1}, {"a": -5, "b": "x"}, {"a": 0, "b": "", "zz": [1, {"q": None}]}],
    "additional-schema": [{"a": 1, "b": "s"}, {"z": "y"}],
    "required-unlisted": [{"name": 1}, {"name": "n", "x": 2}],
    "min-max-properties": [{"a": 1}, {"a": 1, "b": 2}, {"q": 1}],
    "ref-recursive": [[], [1, [2, [3]], 4]],
    "pattern-search": ["abc", "z", "\nb\n"],
    "pattern-length": ["ab", "xYz"],
    "format-date": ["2024-02-29", "0001-01-01"],
    "format-ipv4": ["0.0.0.0", "255.255.255.255"],
    "int-big": [10**20, 10**25, 123456789012345678901234],
    "number-range": [-1.49, 0, 2.25, 2, -1],
    "multipleOf": [0, 7, -14, 7 * 10**12],
    "prefixItems": [[], ["a"], ["a", 1]],
    "patternProperties": [{}, {"x": 1, "xy": 2}],
}


@pytest.mark.parametrize("name", sorted(VALID_EXAMPLES))
def test_hand_picked_valid_instances_accepted(name):
    schema = SCHEMAS[name]
    validator = Draft202012Validator(schema, format_checker=FORMATS)
    for ws in ("compact", "spaced", "flexible", "pretty"):
        g = schema_to_grammar(schema, whitespace=ws, extra_properties="spec")
        for v in VALID_EXAMPLES[name]:
            assert validator.is_valid(v), v
            assert accepts(g, dump(canonical_order(v, schema), ws)), (ws, v)


def test_whitespace_layouts():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array"}}}
    value = {"a": 1, "b": [1, 2]}
    spaced = schema_to_grammar(schema)  # the default: json.dumps' own separators
    assert accepts(spaced, json.dumps(value)) and accepts(spaced, '{"a": 1, "b": [1, 2]}')
    assert not accepts(spaced, '{"a":1,"b":[1,2]}') and not accepts(spaced, '{"a": 1,"b": [1, 2]}')
    assert not accepts(spaced, '{ "a": 1, "b": [1, 2] }') and not accepts(spaced, '{"a":  1, "b": [1, 2]}')
    compact = schema_to_grammar(schema, whitespace="compact")
    assert accepts(compact, '{"a":1,"b":[1,2]}')
    assert not accepts(compact, '{"a": 1,"b":[1,2]}')
    pretty = schema_to_grammar(schema, whitespace="pretty")
    assert accepts(pretty, json.dumps(value, indent=2))
    assert not accepts(pretty, json.dumps(value))
    flexible = schema_to_grammar(schema, whitespace="flexible")
    assert accepts(flexible, '{ "a" :\n1 ,\t"b" : [ 1 , 2 ] }')
    assert accepts(flexible, "{" + " " * 20 + "}")
    assert not accepts(flexible, "{" + " " * 21 + "}")
    assert not accepts(flexible, ' {"a":1}')


def test_property_order_and_duplicates():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    assert accepts(g, '{"a":1,"b":"x","c":true}')
    assert not accepts(g, '{"b":"x","a":1}')  # listed properties come in schema order
    assert not accepts(g, '{"a":1,"b":1}')
    assert not accepts(g, '{"a":1,"c":0,"b":1}')  # a listed name is never an additional key
    assert not accepts(g, '{"c":0,"a":"x"}')


def test_string_escapes():
    g = schema_to_grammar({"type": "string"})
    for ok in ['"a\\"b"', '"\\\\"', '"\\/"', '"\\b\\f\\n\\r\\t"', '"\\u00e9\\uD83D\\uDE00"', '"é😀"']:
        assert accepts(g, ok), ok
    for bad in ['"a\nb"', '"\\x"', '"\\u12"', '"\x01"']:
        assert not accepts(g, bad), bad
    counted = schema_to_grammar({"type": "string", "minLength": 2})
    assert not accepts(counted, '"\\uD83D\\uDE00"')  # one code point
    assert accepts(counted, '"\\uD83D\\uDE00x"')


def test_a_pattern_used_twice_is_one_rule_that_both_places_call():
    path = {"type": "string", "pattern": "^[a-z]+[.](dll|exe)$"}
    schema = {"type": "object", "properties": {"a": path, "b": dict(path), "c": {**path, "maxLength": 9}}}
    g = schema_to_grammar(schema, whitespace="compact")
    (rule,) = [name for name, body in g.rules.items() if "[a-z]*" in format_expr(body)]  # (c's has a bound)
    calls = [name for name, body in g.rules.items() for ref in format_expr(body).split() if ref == rule]
    assert len(calls) >= 2  # (a and b call it: one set of parser states, one set of masks)
    assert accepts(g, '{"a":"x.dll","b":"yz.exe","c":"q.dll"}')
    assert not accepts(g, '{"a":"x.dll","b":"yz.ex","c":"q.dll"}')
    assert not accepts(g, '{"a":"x.dll","b":"yz.exe","c":"abcdef.dll"}')


def test_overlapping_oneof_is_exactly_one_unless_read_as_anyof():
    schema = {"oneOf": [{"type": "integer"}, {"minimum": 2}]}
    g = schema_to_grammar(schema)  # integers below 2, or any other value (an integer >= 2 is valid twice)
    assert accepts(g, "1") and accepts(g, '"x"') and not accepts(g, "2") and not accepts(g, "7")
    g = schema_to_grammar(schema, oneof_as_anyof=True)
    assert accepts(g, "1") and accepts(g, "2")
    distinct = schema_to_grammar({"oneOf": [{"const": "a"}, {"const": "b"}]})
    assert accepts(distinct, '"a"') and not accepts(distinct, '"c"')


def test_lenient_warns_once_per_keyword():
    schema = {"type": "array", "uniqueItems": True, "items": {"not": {"format": "email"}}}
    with pytest.raises(SchemaError, match="uniqueItems"):
        schema_to_grammar(schema)
    g = schema_to_grammar(schema, lenient=True)
    assert (
        len(g.warnings) == 2
        and any("/uniqueItems" in w for w in g.warnings)
        and any("/items/not/format" in w for w in g.warnings)
    )


def test_unique_items_trivial_cases_compile():
    g = schema_to_grammar({"type": "array", "uniqueItems": True, "maxItems": 1})
    assert accepts(g, "[1]") and not accepts(g, "[1,1]")
    assert accepts(schema_to_grammar({"type": "string", "uniqueItems": True}), '"x"')


def test_big_length_bounds_stay_small():
    g = schema_to_grammar({"type": "string", "minLength": 5, "maxLength": 100000})
    assert len(g.to_gbnf()) < 2000
    g = schema_to_grammar({"type": "string", "minLength": 5, "maxLength": 20000})
    assert accepts(g, json.dumps("x" * 5)) and not accepts(g, json.dumps("x" * 4))


def test_conj_sample():
    schema = json.loads(
        (__import__("pathlib").Path(__file__).resolve().parents[3] / "samples" / "conj.json").read_text()
    )
    g = schema_to_grammar(schema)
    good = {"verb": "comer", "tense": "presente", "person": "1st", "form": "comemos"}
    assert accepts(g, dump(good, "spaced"))
    assert accepts(g, dump({**good, "tense": "pretérito", "form": "comí"}, "spaced"))
    assert not accepts(g, dump({**good, "verb": "eat"}, "spaced"))
    assert not accepts(g, dump({**good, "form": "x" * 41}, "spaced"))
    assert not accepts(g, dump({**good, "extra": 1}, "spaced"))
    assert len(schema["properties"]["verb"]["enum"]) == 20


def test_large_schemas_compile_in_linear_passes():
    # an enum of 20,000 strings (each value is checked once, not against the whole list)
    g = schema_to_grammar({"type": "string", "enum": [f"value-{i}" for i in range(20_000)]})
    assert accepts(g, '"value-19999"') and not accepts(g, '"value-20000"')
    # 2,000 optional properties and no minProperties/maxProperties: nothing to count
    g = schema_to_grammar(
        {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(2000)}}, whitespace="compact"
    )
    assert accepts(g, '{"p3":1,"p1999":2}') and not accepts(g, '{"p1999":2,"p3":1}')


def test_const_with_enum_keeps_both_checks():
    g = schema_to_grammar({"const": "a", "enum": ["a", "b"]})
    assert accepts(g, '"a"') and not accepts(g, '"b"')
    with pytest.raises(SchemaError, match="accepts no value"):
        schema_to_grammar({"const": "c", "enum": ["a", "b"]})


def test_strings_with_the_same_bounds_share_one_rule():
    """Every string of a schema with the same minLength and maxLength is one rule (a tool
    file repeats `maxLength: 30` in each tool, and array items are called from each copy of
    the repeat): its parser states, and so its masks, are shared by all of them."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 30},
            "b": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3},
            "c": {"type": "string", "minLength": 1, "maxLength": 30},
            "d": {"type": "object", "properties": {"e": {"type": "string", "maxLength": 30}}},
        },
        "required": ["a", "b", "c", "d"],
    }
    grammar = schema_to_grammar(schema)
    assert sorted(n for n in grammar.rules if n.startswith("string-")) == ["string-0-30", "string-1-30"]
    text = '{"a": "x", "b": ["", "yy"], "c": "z", "d": {"e": "w"}}'
    assert accepts(grammar, text.encode())
    assert not accepts(grammar, text.replace('"c": "z"', '"c": ""').encode())
