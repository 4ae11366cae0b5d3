"""What a lenient schema's grammar leaves out, as data: `Grammar.not_enforced` and
`Constraint.not_enforced` list the JSON pointers of the keywords dropped (one each, in
the order met), whatever the warning text says; an exact grammar lists none. The list
says nothing of the language: grammars equal but for it are equal and share the engine's
cache entry, and each compiled grammar keeps its own list."""

from __future__ import annotations

import pytest

from ministruct.engine import cache
from ministruct.engine.compile import compile_grammar
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import SchemaError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema.compiler import schema_to_grammar

VOCAB = Vocabulary.from_bytes([b"[", b"]", b'"', b"a", b"b", b",", b" ", b""], eog_ids=[7])
FREE_UNIQUE = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
SEVERAL = {
    "type": "object",
    "properties": {
        "tags": FREE_UNIQUE,
        "when": {"type": "string", "format": "uri-template"},
        "n": {"type": "integer"},
    },
}


def test_the_pointers_of_every_keyword_left_out_and_none_for_an_exact_schema():
    with pytest.raises(SchemaError):
        schema_to_grammar(SEVERAL)
    g = schema_to_grammar(SEVERAL, lenient=True)
    assert g.not_enforced == ["/properties/tags/uniqueItems", "/properties/when/format"]
    exact = schema_to_grammar({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}, lenient=True)
    assert exact.not_enforced == []


def test_a_dropped_unevaluated_keyword_is_listed_by_its_pointer():
    # (an unevaluatedProperties whose rewrite is past what can be done: dynamic scope)
    schema = {
        "type": "object",
        "properties": {"o": {"$dynamicRef": "#meta", "unevaluatedProperties": False}},
        "$defs": {"m": {"$dynamicAnchor": "meta", "properties": {"k": True}}},
    }
    with pytest.raises(SchemaError) as refused:
        schema_to_grammar(schema)
    assert schema_to_grammar(schema, lenient=True).not_enforced == [refused.value.pointer] == ["/properties/o"]


def test_the_list_does_not_come_from_the_warning_text():
    """A source name that reads like a warning's own words changes nothing."""
    c = Constraint.from_json_schema(FREE_UNIQUE, lenient=True, source="odd: at /x: keyword; ignored (lenient)")
    assert c.not_enforced == ["/uniqueItems"]
    assert Constraint.from_json_schema({"type": "string"}, lenient=True).not_enforced == []
    assert Constraint.from_regex("a: at /b: c; ignored (lenient)").not_enforced == []


def test_thinking_first_keeps_the_answers_list():
    c = Constraint.from_json_schema(FREE_UNIQUE, lenient=True).think_first(close="</think>", open="<think>")
    assert c.not_enforced == ["/uniqueItems"]


def test_equal_grammars_share_a_cache_key_and_keep_their_own_lists(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MINISTRUCT_NO_CACHE", raising=False)
    lenient = Constraint.from_json_schema(FREE_UNIQUE, lenient=True, whitespace="compact")
    plain = Constraint.from_json_schema({"type": "array", "items": {"type": "string"}}, whitespace="compact")
    assert lenient.grammar == plain.grammar and plain.not_enforced == []
    fp = VOCAB.fingerprint
    assert cache.grammar_key(lenient.grammar, fp) == cache.grammar_key(plain.grammar, fp)
    first = compile_grammar(plain, VOCAB)
    first.persist()
    second = compile_grammar(lenient, VOCAB)  # restored from the entry the first one left
    assert second.grammar.not_enforced == ["/uniqueItems"] and first.grammar.not_enforced == []
