"""Tokenizer diagnostics on hand-made vocabularies (and the round-trip note)."""

from __future__ import annotations

from ministruct.diagnostics.tokenizer import round_trip, tokenizer_report
from ministruct.engine.vocab import Vocabulary

TOKENS = [b"", b"a", b" a", b"b", b" b", b"\xe2", b"\x82\xac", b"a", b"\n", b"", b"<x>", b" ", b"  ", b"ab"]


def vocab() -> Vocabulary:
    return Vocabulary.from_bytes(
        TOKENS, eog_ids=[0], control_ids=[10], control_text={0: "</s>", 10: "<x>"}, n_logits=16, name="toy"
    )


def test_counts_and_examples():
    r = tokenizer_report(vocab())
    assert (r.n_tokens, r.n_logits, r.padded_rows) == (14, 16, 2)
    assert r.unused_rows == 1  # id 9: no bytes, not a control token
    assert r.control == 2 and r.eog == ["</s>"]
    assert r.invalid_utf8 == 2 and [e["id"] for e in r.invalid_utf8_examples] == [5, 6]
    assert r.invalid_utf8_examples[1]["hex"] == "82 ac"
    assert r.duplicate_bytes == 1 and r.duplicate_examples == [{"text": "a", "ids": [1, 7]}]
    # " a" and " b" have unspaced twins; "  " (only spaces) does not count
    assert r.leading_space == 2
    assert {tuple(e["ids"]) for e in r.leading_space_examples} == {(1, 2), (3, 4)}
    assert len(r.notes) == 5 and any("padding" in n for n in r.notes)
    assert r.to_dict()["n_tokens"] == 14


def test_clean_vocabulary_has_no_notes():
    r = tokenizer_report(Vocabulary.from_bytes([b"", b"x", b"y"], eog_ids=[0]))
    assert r.notes == [] and r.padded_rows == 0 and r.invalid_utf8 == 0


def test_round_trip_note_when_ids_differ_with_identical_bytes():
    v = vocab()
    greedy = {"ab": [13], "a": [1], "b": [3]}
    rt = round_trip(v, [1, 3], lambda s: greedy[s])  # "a" + "b" re-tokenizes as "ab"
    assert not rt.same_ids and rt.same_bytes
    note = rt.note()
    assert note.startswith("tokenizer note:") and "identical bytes" in note and "first difference at token 0" in note
    assert rt.to_dict() == {"generated": [1, 3], "retokenized": [13], "same_ids": False, "same_bytes": True}
    exact = round_trip(v, [13], lambda s: greedy[s])
    assert exact.same_ids and exact.note() is None


def test_round_trip_reports_different_bytes():
    rt = round_trip(vocab(), [1], lambda s: [2])  # a tokenizer that adds a leading space
    assert not rt.same_bytes and "different bytes" in rt.note()
