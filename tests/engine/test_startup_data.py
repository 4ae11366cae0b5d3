"""Per-vocabulary data read back instead of recomputed: the saved fingerprint, and the
budget's token facts read off the trie, each against a direct recomputation."""

from __future__ import annotations

import pytest

from ministruct.engine import budget
from ministruct.engine.compile import compile_grammar
from ministruct.engine.vocab import PackedTokens, Vocabulary
from ministruct.grammar.constraint import load_constraint

SMALL = Vocabulary.from_bytes([b"a", b"ab", b"abc", b"{", b'{"', b'":', b"x", b""], eog_ids=[7])


def test_the_saved_fingerprint_comes_back_and_is_the_computed_one():
    arrays, meta = SMALL.to_arrays()
    back = Vocabulary.from_arrays(arrays, meta)
    assert "fingerprint" in back.__dict__  # read, not hashed again
    assert (
        back.fingerprint
        == SMALL.fingerprint
        == Vocabulary.from_arrays(arrays, {**meta, "fingerprint": None}).fingerprint
    )


def test_tokens_read_back_packed_are_the_saved_tokens():
    arrays, meta = SMALL.to_arrays()
    back = Vocabulary.from_arrays(arrays, {**meta, "control_text": [[7, "<eos>"]]})
    assert isinstance(back.tokens, PackedTokens)  # one buffer, not a bytes object per token
    assert list(back.tokens) == list(SMALL.tokens) and len(back) == len(SMALL)
    assert [back.tokens[i] for i in range(-len(SMALL), len(SMALL))] == list(SMALL.tokens) * 2
    assert back.tokens[1:4] == list(SMALL.tokens[1:4]) and back.tokens[::-3] == list(SMALL.tokens[::-3])
    with pytest.raises(IndexError):
        back.tokens[len(SMALL)]
    assert back.text_ids.tolist() == SMALL.text_ids.tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert back.lengths.tolist() == [len(t) for t in SMALL.tokens]
    assert back.decode([2, 5, 7]) == b'abc":'


def test_a_fingerprint_saved_by_another_rule_is_recomputed():
    arrays, meta = SMALL.to_arrays()
    back = Vocabulary.from_arrays(arrays, {**meta, "fingerprint": ["other rule", "0" * 32]})
    assert "fingerprint" not in back.__dict__ and back.fingerprint == SMALL.fingerprint


def _shortcuts_by_set(compiled) -> list[tuple[int, int]]:
    """The definition: the longest text token (2 bytes or more) spelling a prefix of the
    literal chain from q, found by looking every prefix up in the set of token bytes."""
    a, vocab = compiled.automaton, compiled.vocab
    tokens = {vocab.tokens[t] for t in vocab.text_ids.tolist()}
    longest = max(len(t) for t in tokens)
    out = []
    for q in range(len(a.eps)):
        chain, states, x = bytearray(), [q], q
        while len(chain) < longest:
            edges = a.byte_edges[x]
            if len(edges) != 1 or edges[0][0] != edges[0][1] or a.eps[x] or a.calls[x] or a.token_edges[x]:
                break
            if x in a.final and x != q:
                break
            chain.append(edges[0][0])
            x = edges[0][2]
            states.append(x)
        for k in range(len(chain), 1, -1):
            if bytes(chain[:k]) in tokens:
                out.append((q, states[k]))
                break
    return out


def _one_byte_by_scan(compiled) -> list[int]:
    vocab = compiled.vocab
    return sorted({vocab.tokens[t][0] for t in vocab.text_ids.tolist() if len(vocab.tokens[t]) == 1})


def test_trie_reading_matches_the_definition_on_a_small_vocabulary():
    c = compile_grammar(load_constraint(choice=["abcab", '{"a":x', "ab"]).grammar, SMALL, use_cache=False)
    assert [(q, p) for q, p, _ in budget._literal_shortcuts(c)] == _shortcuts_by_set(c) != []
    assert budget._one_byte_tokens(c).nonzero()[0].tolist() == _one_byte_by_scan(c)


@pytest.mark.model
@pytest.mark.parametrize(
    "kind,source", [("schema", "samples/conj.json"), ("schema", "samples/capital.json"), ("grammar", "json")]
)
def test_trie_reading_matches_the_definition_on_the_real_vocabulary(vocab, kind, source):
    c = compile_grammar(load_constraint(**{kind: source}).grammar, vocab, use_cache=False)
    assert [(q, p) for q, p, _ in budget._literal_shortcuts(c)] == _shortcuts_by_set(c)
    assert budget._one_byte_tokens(c).nonzero()[0].tolist() == _one_byte_by_scan(c)
