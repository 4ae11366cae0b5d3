"""Mask buffers pass from a grammar that is gone to the next one, never from under a holder."""

from __future__ import annotations

import gc

import numpy as np

from ministruct.engine import buffers
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import Alt, Grammar, Literal, Repeat

TOKENS = [b"a", b"b", b"ab", b"ba", b"c", b""]
VOCAB = Vocabulary.from_bytes(TOKENS, eog_ids=[len(TOKENS) - 1])
ITEMS = Repeat(Alt((Literal("a"), Literal("b"))), 0, None)


def _masks_of_a_walk(tokens: list[int]) -> list[np.ndarray]:
    m = Matcher(compile_grammar(Grammar({"root": ITEMS}), VOCAB, use_cache=False))
    out = []
    for t in tokens:
        out.append(m.mask())
        m.advance(t)
    out.append(m.mask())
    return out


def _drain() -> None:
    while buffers.take(VOCAB.n_logits) is not None:
        pass


def test_masks_of_a_grammar_that_is_gone_serve_the_next_one():
    _drain()
    compiled = compile_grammar(Grammar({"root": ITEMS}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    m.mask()
    m.advance(0)
    m.mask()
    del m, compiled
    gc.collect()
    assert buffers.pooled_bytes() >= VOCAB.n_logits
    taken = buffers.take(VOCAB.n_logits)
    assert taken is not None and taken.flags.writeable
    _drain()


def test_a_mask_someone_holds_is_never_reused():
    _drain()
    kept = _masks_of_a_walk([0, 1])  # the list holds every mask of that grammar
    before = [k.copy() for k in kept]
    gc.collect()
    assert buffers.pooled_bytes() == 0
    view = _masks_of_a_walk([2])[0][:3]  # a view holds its array
    gc.collect()
    other = Matcher(compile_grammar(Grammar({"root": Literal("cc")}), VOCAB, use_cache=False))
    legal = other.mask()  # written into whatever the pool had
    assert legal[TOKENS.index(b"c")] and not legal[0]
    for k, b in zip(kept, before):
        assert np.array_equal(k, b) and not k.flags.writeable
    assert view.tolist() == [True, True, True]
    _drain()
