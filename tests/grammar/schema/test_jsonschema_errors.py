"""Bad or unenforceable schemas raise SchemaError: one line, naming the JSON pointer."""

from __future__ import annotations

import pytest

from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar

CASES = [
    ("not a schema", [1, 2], "/", None),
    ("string schema", "string", "/", None),
    ("unknown type", {"properties": {"x": {"type": "kaboom"}}}, "/properties/x/type", "unknown type 'kaboom'"),
    ("type number", {"type": 123}, "/type", "type must be"),
    ("ref to nowhere", {"$ref": "#/$defs/missing"}, "/$ref", "points nowhere"),
    ("escaped ref to nowhere", {"$defs": {"a/b": {}}, "$ref": "#/$defs/a~1c"}, "/$ref", "points nowhere"),
    ("remote ref", {"$ref": "http://example.com/s.json"}, "/$ref", "remote $ref"),
    ("lookaround", {"type": "string", "pattern": "^a(?!b)"}, "/pattern", "pattern"),
    ("bad regex", {"properties": {"p": {"type": "string", "pattern": "(("}}}, "/properties/p/pattern", "pattern"),
    ("uniqueItems", {"type": "array", "uniqueItems": True}, "/uniqueItems", "uniqueItems"),
    ("not", {"items": {"not": {"format": "email"}}}, "/items/not/format", "'not'"),
    ("if", {"if": {"format": "email"}, "then": {"minLength": 1}}, "/if/format", "'if'"),
    ("contains", {"contains": {"type": "string"}, "minContains": 3000}, "/contains", "the limit"),
    (
        "unevaluated",
        {"$dynamicRef": "#/$defs/m", "$defs": {"m": {}}, "unevaluatedProperties": False},
        "/",
        "$dynamicRef",
    ),
    ("oneOf overlap", {"oneOf": [{"type": "string"}, {"format": "email"}]}, "/oneOf/1/format", "overlap"),
    ("big multipleOf", {"type": "number", "multipleOf": 0.9973, "minimum": 3.3}, "/multipleOf", "the limit"),
    (
        "allOf clash",
        {"allOf": [{"prefixItems": [True], "items": [{"type": "string"}]}, {"prefixItems": [{"type": "integer"}]}]},
        "/allOf/0",
        "allOf",
    ),
    ("negative minLength", {"minLength": -1}, "/minLength", "non-negative"),
    ("empty language", {"type": "string", "enum": [1]}, "/", "accepts no value"),
    (
        "endless recursion",
        {"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}}, "$ref": "#/$defs/a"},
        "/",
        "finite",
    ),
    ("dynamicRef", {"$dynamicRef": "#x"}, "/$dynamicRef", None),
]


@pytest.mark.parametrize("name,schema,pointer,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_schema(name, schema, pointer, fragment):
    with pytest.raises(SchemaError) as ei:
        schema_to_grammar(schema, source="s.json")
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"s.json: at {pointer}:"), msg
    assert ei.value.pointer == pointer
    if fragment:
        assert fragment in msg, msg


def test_kaboom_message_exactly():
    with pytest.raises(SchemaError) as ei:
        schema_to_grammar({"properties": {"x": {"type": "kaboom"}}})
    assert str(ei.value) == "<schema>: at /properties/x/type: unknown type 'kaboom'"
    assert ei.value.keyword == "type"


def test_lenient_ignores_with_warning_but_not_bad_schemas():
    g = schema_to_grammar({"type": "array", "uniqueItems": True}, lenient=True)
    assert len(g.warnings) == 1 and "/uniqueItems" in g.warnings[0]
    with pytest.raises(SchemaError):
        schema_to_grammar({"type": "kaboom"}, lenient=True)
    with pytest.raises(SchemaError):
        schema_to_grammar({"$ref": "http://example.com/s.json"}, lenient=True)


def test_ref_pointer_escapes_resolve():
    s = {
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "string"}, "e f": {"type": "null"}},
        "anyOf": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}, {"$ref": "#/$defs/e%20f"}],
    }
    schema_to_grammar(s)
    schema_to_grammar({"definitions": {"x": {"type": "integer"}}, "$ref": "#/definitions/x"})
    schema_to_grammar({"type": "object", "properties": {"self": {"$ref": "#"}}})


def test_unknown_format_is_an_annotation_with_a_warning():
    g = schema_to_grammar({"type": "string", "format": "int32-ish"})
    assert g.warnings and "int32-ish" in g.warnings[0]


@pytest.mark.parametrize(
    "schema, pointer",
    [
        ({"enum": [1, float("nan")]}, "/enum/1"),
        ({"type": "number", "maximum": float("inf")}, "/maximum"),
        ({"properties": {"a/b": {"const": float("-inf")}}}, "/properties/a~1b/const"),
    ],
)
def test_a_python_schema_holding_nan_or_infinity_is_refused_at_its_pointer(schema, pointer):
    """A library caller's dict can hold what no JSON text can; generating `NaN` would give
    output no JSON reader takes."""
    with pytest.raises(SchemaError, match="not JSON numbers") as e:
        schema_to_grammar(schema)
    assert e.value.pointer == pointer


@pytest.mark.parametrize(
    ("array", "reason"),
    [
        ({"items": {"type": "string"}}, "three or more distinct items are not a context-free language"),
        ({"items": {"type": "object"}, "maxItems": 3}, "three or more distinct items are not a context-free language"),
        ({"items": {"type": "string"}, "maxItems": 2}, "two distinct items need one copy of the grammar per character"),
        ({"items": {"type": "number", "minimum": 0, "maximum": 1}}, "integers in a range of at most 1,000"),
        ({"prefixItems": [{"enum": [1, 2]}]}, "together with prefixItems"),
        ({"items": {"enum": [1, 2]}, "contains": {"const": 1}}, "together with contains"),
    ],
)
def test_unique_items_that_cannot_be_a_grammar_are_refused_saying_why(array, reason):
    schema = {"type": "array", "uniqueItems": True, **array}
    with pytest.raises(SchemaError, match="at /uniqueItems: keyword 'uniqueItems' is not enforced") as e:
        schema_to_grammar(schema)
    assert reason in str(e.value) and e.value.keyword == "uniqueItems"
    assert any(reason in w for w in schema_to_grammar(schema, lenient=True).warnings)
