"""`ministruct gen --schema` end to end on the bundled model for the shapes real schemas
use that used to be refused (schema/multiples.py, schema/budget.py, `format: regex`,
uniqueItems over listed values and integer ranges, a oneOf past exactly-one's limit told
apart by a tag): every output is complete and valid by `jsonschema`
(Draft 2020-12, formats asserted) with the standard's `multipleOf` (multiples.py says
where the package's float division differs)."""

from __future__ import annotations

import json
import re

import pytest
from jsonschema import Draft202012Validator

from cli.conftest import gen_valid_outputs
from ministruct.grammar.schema.multiples import exact_validator

pytestmark = pytest.mark.model

SCHEMAS = {
    "decimal-multipleOf": {
        "type": "object",
        "properties": {
            "item": {"type": "string", "maxLength": 20},
            "price": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1000},
            "rating": {"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 5},
        },
        "required": ["item", "price", "rating"],
    },
    "format-with-length": {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email", "maxLength": 64},
            "homepage": {"type": "string", "format": "uri", "maxLength": 2048, "pattern": "^https://"},
            "summary": {"type": "string", "pattern": "^(?:\\S+\\s+){0,9}\\S+$", "maxLength": 500},
        },
        "required": ["email", "homepage", "summary"],
    },
    "format-regex": {
        "type": "object",
        "properties": {"field": {"type": "string", "maxLength": 20}, "pattern": {"type": "string", "format": "regex"}},
        "required": ["field", "pattern"],
    },
    "unique-listed-tags": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 30},
            "tags": {
                "type": "array",
                "items": {"enum": ["news", "sport", "science", "travel", "food", "music", "film", "tech"]},
                "uniqueItems": True,
                "minItems": 2,
                "maxItems": 4,
            },
        },
        "required": ["title", "tags"],
    },
    "unique-integer-range": {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 49},
        "uniqueItems": True,
        "minItems": 6,
        "maxItems": 6,
    },
    # twelve branches that overlap where `event` is absent: exactly-one would need more than
    # logic.MAX_BRANCHES, so they are generated with `event` present (a restriction)
    "tagged-large-oneOf": {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "event": {"const": k},
                    "at": {"type": "integer", "minimum": 0},
                    f"{k}_detail": {"type": "string", "maxLength": 20},
                },
                "required": ["at"],
            }
            for k in ["click", "view", "scroll", "hover", "submit", "focus", "blur", "keydown", "keyup", "resize"]
            + ["load", "error"]
        ]
    },
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_gen_gives_complete_valid_output(run_cli, tmp_path, name):
    schema = SCHEMAS[name]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(schema))
    cls = exact_validator(Draft202012Validator)
    validator = cls(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for value in gen_valid_outputs(run_cli, path, validator):
        if name == "format-regex":
            re.compile(value["pattern"])
        if name == "tagged-large-oneOf":
            assert "event" in value and sum(Draft202012Validator(b).is_valid(value) for b in schema["oneOf"]) == 1
        if name.startswith("unique-"):
            items = value["tags"] if isinstance(value, dict) else value
            assert len(set(items)) == len(items) >= 2, value
