"""An enum whose siblings assert only `type` is filtered without jsonschema, with
jsonschema's verdicts; compiling such schemas leaves jsonschema unimported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.values import _typed_only

VALUES = [None, True, False, 0, 1, -3, 1.0, 2.5, -0.0, 1e300, "", "a", [], [1], {}, {"a": 1}]
TYPES = ["null", "boolean", "string", "array", "object", "number", "integer"]
SCHEMAS = (
    [{"type": t} for t in TYPES]
    + [{"type": [a, b]} for a in TYPES for b in TYPES if a < b]
    + [{}, True, {"title": "t", "description": "d", "type": "integer"}, {"type": []}]
)


@pytest.mark.parametrize("schema", SCHEMAS, ids=json.dumps)
def test_type_only_verdicts_are_jsonschemas(schema):
    ours = _typed_only(schema)
    assert ours is not None
    oracle = Draft202012Validator(schema)
    assert [ours(v) for v in VALUES] == [oracle.is_valid(v) for v in VALUES]


@pytest.mark.parametrize("schema", [{"type": "string", "minLength": 2}, {"type": "nope"}, {"not": {}}, False])
def test_other_keywords_go_to_jsonschema(schema):
    assert _typed_only(schema) is None


def test_enum_with_type_sibling_keeps_only_values_of_that_type():
    g = schema_to_grammar({"type": "integer", "enum": [1, 2.0, 2.5, "3", True, None]})
    assert g.to_gbnf().strip() == 'root ::= "1" | "2.0" | "2"'


def test_compiling_enum_schemas_does_not_import_jsonschema():
    code = (
        "import sys\n"
        "from ministruct.grammar.constraint import Constraint\n"
        "for f in ('samples/conj.json', 'samples/capital.json'):\n"
        "    Constraint.from_json_schema(open(f).read())\n"
        "print('jsonschema' in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
