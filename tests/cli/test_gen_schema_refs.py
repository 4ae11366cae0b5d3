"""`ministruct gen --schema` end to end on the bundled model for what schema/unevaluated.py,
schema/dynamic.py and schema/documents.py compile: `unevaluatedProperties` beside
`anyOf`, `unevaluatedItems` beside `contains`, an extensible list whose items a
`$dynamicRef` names, and a remote `$ref` given with --schema-documents. Every output is
complete and valid by `jsonschema` (Draft 2020-12, formats asserted)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from cli.conftest import gen_valid_outputs

pytestmark = pytest.mark.model

COLOUR = {"type": "string", "enum": ["red", "green", "blue"]}
SCHEMAS = {
    "unevaluatedProperties": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}},
        "required": ["name"],
        "anyOf": [
            {"properties": {"age": {"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["age"]},
            {"properties": {"email": {"type": "string", "format": "email"}}, "required": ["email"]},
        ],
        "unevaluatedProperties": False,
    },
    "unevaluatedItems": {
        "type": "array",
        "prefixItems": [{"type": "string", "maxLength": 10}],
        "contains": {"type": "integer", "minimum": 1, "maximum": 9},
        "unevaluatedItems": {"type": "boolean"},
        "maxItems": 4,
    },
    "$dynamicRef": {
        "$id": "https://example.com/shopping",
        "$ref": "list",
        "$defs": {
            "item": {"$dynamicAnchor": "item", "type": "string", "maxLength": 12},
            "list": {
                "$id": "list",
                "type": "array",
                "maxItems": 4,
                "items": {"$dynamicRef": "#item"},
                "$defs": {"any": {"$dynamicAnchor": "item"}},
            },
        },
    },
    "remote $ref": {
        "type": "object",
        "properties": {"colour": {"$ref": "https://example.com/colour.json"}, "size": {"type": "integer"}},
        "required": ["colour", "size"],
    },
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_gen_gives_complete_valid_output(run_cli, tmp_path, name):
    schema = SCHEMAS[name]
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    (tmp_path / "colour.json").write_text(json.dumps(COLOUR))
    docs = ["--schema-documents", f"https://example.com/={tmp_path}"] if name == "remote $ref" else []
    registry = Registry().with_resource(
        "https://example.com/colour.json", Resource.from_contents(COLOUR, default_specification=DRAFT202012)
    )
    validator = Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
    gen_valid_outputs(run_cli, path, validator, *docs)
