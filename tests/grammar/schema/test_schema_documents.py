"""Remote `$ref`s (schema/documents.py): found only in the documents given (a schema, a
file, a directory under a URI prefix), never fetched; bundled into the one document."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError, UsageError
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.documents import bundle, normalize_documents
from ministruct.grammar.schema.options import SchemaOptions

ITEM = {"$id": "https://example.com/item.json", "type": "object", "properties": {"n": {"$ref": "count.json"}}}
COUNT = {"type": "integer", "minimum": 1}


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "item.json").write_text(json.dumps(ITEM))
    (tmp_path / "schemas" / "count.json").write_text(json.dumps(COUNT))
    return tmp_path / "schemas"


def _agrees(schema, documents, values):
    """The grammar accepts exactly the values the validator (given the same documents) accepts."""
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec", documents=documents)
    registry = Registry().with_resources(
        (uri, Resource.from_contents(doc, default_specification=DRAFT202012))
        for uri, doc in (("https://example.com/item.json", ITEM), ("https://example.com/count.json", COUNT))
    )
    v = Draft202012Validator(schema, registry=registry)
    for value in values:
        text = json.dumps(value, separators=(",", ":"))
        assert accepts(g, text) is v.is_valid(value), value


VALUES = [{"n": 1}, {"n": 0}, {"n": "x"}, {}, [], {"n": 3, "m": None}, 5]


def test_a_directory_under_a_uri_prefix(folder):
    schema = {"type": "array", "items": {"$ref": "https://example.com/item.json"}}
    _agrees(schema, {"https://example.com/": str(folder)}, [[v] for v in VALUES] + [[]])


def test_a_schema_or_a_file_for_one_uri(folder):
    schema = {"$ref": "https://example.com/item.json"}
    docs = {"https://example.com/item.json": ITEM, "https://example.com/count.json": str(folder / "count.json")}
    _agrees(schema, docs, VALUES)


def test_nothing_is_fetched_a_remote_ref_not_given_is_refused_by_pointer():
    schema = {"properties": {"a": {"$ref": "https://example.com/item.json"}}}
    with pytest.raises(SchemaError) as ei:
        schema_to_grammar(schema)
    assert ei.value.pointer == "/properties/a/$ref" and "`documents`" in str(ei.value)
    with pytest.raises(SchemaError):  # a prefix that does not hold the file: the same
        schema_to_grammar(schema, documents={"https://example.com/": "/nonexistent"})


def test_a_document_with_its_own_id_is_reached_by_the_uri_it_was_found_at():
    other = {"$id": "https://elsewhere.org/real.json", "$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}
    schema = {"$ref": "https://example.com/found-at.json"}
    g = schema_to_grammar(schema, whitespace="compact", documents={"https://example.com/found-at.json": other})
    assert accepts(g, '"x"') and not accepts(g, "1")


def test_paths_outside_the_directory_are_not_read(folder):
    schema = {"$ref": "https://example.com/../schemas/count.json"}
    docs = normalize_documents({"https://example.com/sub/": str(folder)})
    assert bundle({"$ref": "https://example.com/sub/../../etc/passwd"}, docs) == {
        "$ref": "https://example.com/sub/../../etc/passwd"
    }
    assert bundle(schema, ()) is schema


def test_documents_are_checked_once_naming_the_option():
    with pytest.raises(UsageError) as ei:
        SchemaOptions(documents={"relative/": "x"})
    assert ei.value.parameter == "documents"
    with pytest.raises(UsageError):
        SchemaOptions(documents=5)
    opts = SchemaOptions(documents={"https://a/": "d", "https://a/b/": {"type": "integer"}})
    assert opts.documents[0][:2] == ("https://a/b/", "json")
    assert SchemaOptions(**opts.to_dict()) == opts  # (options rebuilt from their dict: a Lark %json's)


@pytest.mark.parametrize(
    "draft,key",
    [
        ("http://json-schema.org/draft-04/schema#", "id"),
        ("http://json-schema.org/draft-06/schema#", "$id"),
        ("http://json-schema.org/draft-07/schema#", "$id"),
    ],
)
def test_an_id_that_is_a_plain_name_fragment_is_an_anchor(draft, key):
    """`"id": "#thing"` (draft-04) and `"$id": "#thing"` (drafts 6, 7) name a subschema that
    `"$ref": "#thing"` reaches, as the validator of that draft reads it."""
    import jsonschema

    schema = {
        "$schema": draft,
        "definitions": {"thing": {key: "#thing", "type": "integer", "maximum": 5}, "other": {key: "#other"}},
        "type": "object",
        "properties": {"x": {"$ref": "#thing"}, "id": {"type": "string"}},
        "required": ["x"],
    }
    g = schema_to_grammar(schema, whitespace="compact", extra_properties="spec")
    validator = jsonschema.validators.validator_for(schema)(schema)
    for value in ({"x": 3}, {"x": 9}, {"x": "a"}, {"x": 5, "id": "k"}, {"x": 1, "id": 2}):
        assert accepts(g, json.dumps(value, separators=(",", ":"))) == validator.is_valid(value), value
    # a property called id is no identifier, in draft-04 either
    assert accepts(g, '{"x":1,"id":"#thing"}')
