"""engine.bench: seeded random walks over a hand-made vocabulary, time statistics."""

from __future__ import annotations

import numpy as np
import pytest

from ministruct.diagnostics.bench import RESET, TimeStats, decode_rate, random_walk, timed_compile, warm_walk
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, alt

DIGITS = Grammar({"root": Repeat(CharClass(((0x30, 0x39),)), 1, 3)})


def digits_vocab() -> Vocabulary:
    toks = [b"1", b"23", b"456", b"7890", b"a", b"9", b""]
    return Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])


def replay_is_legal(compiled, walk) -> int:
    """Replay a walk's tokens, asserting each was legal where it was chosen; count restarts."""
    m = Matcher(compiled)
    restarts = 0
    for t in walk.tokens:
        if t == RESET or t in compiled.vocab.eog_ids:
            if t != RESET:
                assert m.mask()[t] and m.is_accepting()
            m.reset()
            restarts += 1
            continue
        assert m.mask()[t], t
        m.advance(t)
    return restarts


def test_walk_takes_only_legal_tokens_and_restarts_on_completion():
    c = compile_grammar(DIGITS, digits_vocab(), use_cache=False)
    w = random_walk(c, 200, seed=1)
    assert w.steps == len(w.tokens) == len(w.mask_us) == len(w.legal_counts) == 200
    assert replay_is_legal(c, w) == w.resets > 10  # "1-3 digits" completes often
    assert 4 not in w.tokens and 3 not in w.tokens  # 'a' and the 4-digit token never fit
    assert all(t >= 0 for t in w.mask_us)


def test_walk_is_deterministic_per_seed():
    v = digits_vocab()
    a = random_walk(compile_grammar(DIGITS, v, use_cache=False), 100, seed=7)
    b = random_walk(compile_grammar(DIGITS, v, use_cache=False), 100, seed=7)
    c = random_walk(compile_grammar(DIGITS, v, use_cache=False), 100, seed=8)
    assert a.tokens == b.tokens and a.tokens != c.tokens


def test_warm_walk_walks_an_output_the_cold_walk_did_not():
    """`bench`'s warm figure: the next seed on a fresh compile, never a replay of the cold walk."""
    v = digits_vocab()
    for seed in range(5):
        cold = random_walk(compile_grammar(DIGITS, v, use_cache=False), 100, seed=seed)
        warm = warm_walk(DIGITS, v, 100, after_seed=seed)
        assert warm.steps == 100 and warm.tokens != cold.tokens
        assert warm.tokens == random_walk(compile_grammar(DIGITS, v, use_cache=False), 100, seed=seed + 1).tokens
        replay_is_legal(compile_grammar(DIGITS, v, use_cache=False), warm)


class Refuses:
    """A companion engine that never allows the token '1' (id 0)."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.resets = n, [], 0

    def legal(self):
        out = np.ones(self.n, dtype=bool)
        out[0] = False
        return out

    def advance(self, token):
        self.seen.append(token)

    def reset(self):
        self.resets += 1


def test_companion_is_driven_in_lockstep_with_tokens_both_allow():
    v = digits_vocab()
    comp = Refuses(v.n_logits)
    w = random_walk(compile_grammar(DIGITS, v, use_cache=False), 150, seed=2, companion=comp)
    assert 0 not in w.tokens
    assert comp.seen == [t for t in w.tokens if t != RESET and t not in v.eog_ids]
    assert comp.resets == w.resets


def test_on_step_sees_every_mask():
    v = Vocabulary.from_bytes([b"a", b"b", b""], eog_ids=[2])
    c = compile_grammar(Grammar({"root": alt(Literal("ab"), Literal("b"))}), v, use_cache=False)
    seen = []
    random_walk(c, 5, seed=0, on_step=lambda i, m: seen.append((i, np.flatnonzero(m).tolist())))
    assert [i for i, _ in seen] == list(range(5))
    assert seen[0][1] == [0, 1]


def test_time_stats():
    s = TimeStats.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (s.mean, s.p50, s.max, s.n) == (22.0, 3.0, 100.0, 5)
    assert 4.0 < s.p99 <= 100.0
    assert s.to_dict() == {"mean": 22.0, "p50": 3.0, "p99": round(s.p99, 2), "max": 100.0}
    assert TimeStats.of([]).n == 0


def test_timed_compile_and_negative_steps():
    c, ms = timed_compile(DIGITS, digits_vocab())
    assert ms > 0 and c.mask(c.initial)[0]
    with pytest.raises(ValueError):
        random_walk(c, -1)


def test_decode_rate_counts_steps_between_first_and_last():
    class Fake:
        def steps(self):
            yield from range(5)

    rate, n = decode_rate(Fake())
    assert n == 5 and rate > 0

    class One:
        def steps(self):
            yield 0

    assert decode_rate(One()) == (0.0, 1)
