"""`ministruct gen --schema` end to end on the bundled model for shapes that were refused
before issue 50's second half: exactly-one `oneOf` over many closed object branches (an
operator language) and over branches told apart by patterns (a grammar's rule tree), a
dependency on a name outside `properties`, lookaheads after `^`, `not` of a listed
object, a negated `propertyNames`. Every output is complete and valid by `jsonschema`."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from cli.conftest import gen_valid_outputs

pytestmark = pytest.mark.model

OPERATORS = ["eq", "ne", "lt", "le", "gt", "ge", "in", "and", "or", "not"]
SCHEMAS = {
    "operators": {
        "$defs": {
            "operands": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 2}
        },
        "oneOf": [
            {"type": "object", "required": [op], "properties": {op: {"$ref": "#/$defs/operands"}}} for op in OPERATORS
        ],
    },
    "rule-tree": {
        "$defs": {
            "rule": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["type", "value"],
                        "properties": {
                            "type": {"type": "string", "pattern": t},
                            "value": {"type": "string", "maxLength": 8},
                        },
                    }
                    for t in ("^STRING$", "^PATTERN$", "^SYMBOL$")
                ]
                + [
                    {
                        "type": "object",
                        "required": ["type", "members"],
                        "properties": {
                            "type": {"type": "string", "pattern": t},
                            "members": {"type": "array", "items": {"$ref": "#/$defs/rule"}, "maxItems": 2},
                        },
                    }
                    for t in ("^SEQ$", "^CHOICE$")
                ]
            }
        },
        "$ref": "#/$defs/rule",
    },
    "dependency": {
        "type": "object",
        "properties": {
            "shape": {"enum": ["circle", "square"]},
            "size": {"type": "integer", "minimum": 1, "maximum": 99},
        },
        "required": ["shape", "size"],
        "dependentRequired": {"size": ["unit"]},
    },
    "lookahead": {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^(?!tmp_)(?=.*[a-z]$)[a-z_]{3,12}$"}},
        "required": ["name"],
    },
    "not-listed-object": {
        "type": "object",
        "properties": {
            "x": {"type": "integer", "minimum": 0, "maximum": 3},
            "y": {"type": "integer", "minimum": 0, "maximum": 3},
        },
        "required": ["x", "y"],
        "not": {"enum": [{"x": 0, "y": 0}, {"x": 1, "y": 1}]},
    },
    "some-name": {
        "type": "object",
        "properties": {"title": {"type": "string", "maxLength": 20}},
        "patternProperties": {"^(en|fr|de)$": {"type": "string", "maxLength": 20}},
        "additionalProperties": False,
        "not": {"propertyNames": {"not": {"enum": ["en", "fr", "de"]}}},
    },
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_gen_gives_complete_valid_output(run_cli, tmp_path, name):
    schema = SCHEMAS[name]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(schema))
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    values = gen_valid_outputs(run_cli, path, validator)
    if name == "operators":  # one operator per object: exactly one branch
        assert all(len(value) == 1 for value in values)
    if name == "dependency":
        assert all("unit" in value for value in values)
    if name == "some-name":
        assert all({"en", "fr", "de"} & set(value) for value in values)
