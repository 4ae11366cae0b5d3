"""Walk cuts on the `word` slice (engine/prune.py): grammars whose identifiers loop on word
characters take the word-character tails below a node without walking them, and the
masks stay the exact legal set (brute force over Automaton.step_bytes), in both walks."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import brute_force_mask, small_vocabulary  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine import mask_walks
from ministruct.engine import walk as walk_module
from ministruct.engine.compile import compile_grammar
from ministruct.engine.prune import WORD_BYTES, choose_slice, loop_states
from ministruct.engine.table import DEAD
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq

WORD = CharClass(((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)))
LETTER = CharClass(((0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)))
JSON_BODY = CharClass(((0x22, 0x22), (0x5C, 0x5C)), negated=True)  # a string character
ESCAPED_BODY = Alt(
    (JSON_BODY, Seq((Literal("\\"), CharClass(((0x22, 0x22), (0x5C, 0x5C), (0x6E, 0x6E))))))
)  # or an escape
IDENT = Seq((LETTER, Repeat(WORD, 0, None)))
CHARS = "abcSELxyz_09 ,.()'"


def vocabulary(seed: int) -> Vocabulary:
    words = ("SELECT", "FROM", "AND", "OR", "abc", "x_1", "Sel", "sel")
    return small_vocabulary(seed, CHARS, words, "abcSELxyz_09", 300, 0.6, 8)


VOCABS = [vocabulary(s) for s in range(3)]


@pytest.fixture(autouse=True)
def ask_every_node(monkeypatch):
    """Cuts are asked for only above 2048 tokens; these vocabularies are small."""
    monkeypatch.setattr(mask_walks, "PRUNE_MIN_TOKENS", 1)


atoms = st.one_of(
    st.just(IDENT),
    st.just(Repeat(WORD, 1, None)),
    st.just(Repeat(WORD, 1, 3)),  # bounded: no loop, a chain that ends
    st.sampled_from(["SELECT", "FROM", "AND", "OR", "Sel", " ", ",", ".", "(", ")", "x"]).map(Literal),
    st.sampled_from([CharClass(((0x61, 0x63),)), CharClass(((0x30, 0x39),))]),
)


def _compound(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=4).map(lambda xs: Seq(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
        st.tuples(inner, st.sampled_from([(0, 1), (0, None), (1, None), (1, 3)])).map(
            lambda p: Repeat(p[0], p[1][0], p[1][1])
        ),
    )


exprs = st.recursive(atoms, _compound, max_leaves=8)


def check(grammar: Grammar, vocab: Vocabulary, seed: int, compiled: bool) -> int:
    """Masks along a random path against brute force; returns how many nodes were word-stable."""
    c = compile_grammar(grammar, vocab, use_cache=False)
    rng = random.Random(seed)
    cid = c.initial
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(walk_module.kernel, "wanted", lambda: compiled)
        for _ in range(8):
            m = c.mask(cid)
            want = brute_force_mask(c, cid)
            assert np.array_equal(m, want), (np.flatnonzero(m != want)[:10], c.configs[cid])
            legal = [t for t in np.flatnonzero(m).tolist() if t not in c.vocab.eog_ids]
            if not legal:
                break
            cid = c.step_token(cid, rng.choice(legal))
            assert cid != DEAD
    prune = c._prune
    return 0 if prune is None else int((prune.known() == 1).sum())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs, v=st.integers(0, len(VOCABS) - 1), seed=st.integers(0, 1000), compiled=st.booleans())
def test_word_cuts_keep_masks_exact(expr, v, seed, compiled):
    check(Grammar({"root": Seq((expr, Repeat(Alt((IDENT, Literal(" "))), 0, None)))}), VOCABS[v], seed, compiled)


@pytest.mark.parametrize("compiled", [False, True])
def test_an_identifier_grammar_chooses_word_and_cuts(compiled):
    """A SELECT-like grammar: the word slice is chosen, nodes are found stable, masks exact."""
    items = Seq((IDENT, Repeat(Seq((Literal(","), Repeat(Literal(" "), 0, 1), IDENT)), 0, None)))
    g = Grammar({"root": Seq((Literal("SELECT "), items, Literal(" FROM "), IDENT))})
    c = compile_grammar(g, VOCABS[0], use_cache=False)
    assert choose_slice(c.automaton) == "word"
    assert loop_states(c.automaton, WORD_BYTES).any()
    stable = sum(check(g, VOCABS[0], seed, compiled) for seed in range(4))
    assert stable > 0


def test_json_strings_keep_the_json_slice():
    """A JSON-like value whose names are all inside quotes (a key, a pattern's word) keeps
    json-char beside its string body (word must not be chosen)."""
    key = Seq((Literal('"'), IDENT, Literal('":"')))
    g = Grammar({"root": Seq((Literal("{"), key, Repeat(ESCAPED_BODY, 0, None), Literal('"}')))})
    c = compile_grammar(g, VOCABS[0], use_cache=False)
    assert loop_states(c.automaton, WORD_BYTES).any()
    assert choose_slice(c.automaton) == "json-char"


@pytest.mark.parametrize("body", [JSON_BODY, ESCAPED_BODY], ids=["plain", "escapes"])
@pytest.mark.parametrize("compiled", [False, True])
def test_names_outside_quotes_choose_word_beside_strings(body, compiled):
    """Names beside quoted strings (Python's expressions; a Lark grammar's CNAME beside its
    ESCAPED_STRING): the names are outside quotes, so word is chosen, and its cuts keep
    masks exact."""
    term = Alt((IDENT, Seq((Literal('"'), Repeat(body, 0, None), Literal('"')))))
    g = Grammar({"root": Seq((term, Repeat(Seq((Literal(" + "), term)), 0, None)))})
    c = compile_grammar(g, VOCABS[0], use_cache=False)
    assert choose_slice(c.automaton) == "word"
    assert sum(check(g, VOCABS[0], seed, compiled) for seed in range(4)) > 0


def loop_states_by_byte(auto, alphabet) -> np.ndarray:
    """The definition of prune.loop_states, byte by byte: the greatest set of states each of
    which takes every byte of `alphabet` to some stack topped in the set."""
    n = len(auto.byte_edges)
    succ = {}
    for q in range(n):
        per_byte = [
            {rel[-1] for lo, hi, t in auto.byte_edges[q] if lo <= b <= hi for rel in auto.local(t)[0]} for b in alphabet
        ]
        if all(per_byte):
            succ[q] = per_byte
    alive = set(succ)
    while True:
        dead = {q for q in alive if any(not (tops & alive) for tops in succ[q])}
        if not dead:
            break
        alive -= dead
    out = np.zeros(n, dtype=bool)
    out[sorted(alive)] = True
    return out


string_atoms = st.one_of(
    atoms,
    st.just(Seq((Literal('"'), Repeat(JSON_BODY, 0, None), Literal('"')))),
    st.just(Seq((Literal('"'), Repeat(ESCAPED_BODY, 0, None), Literal('"')))),
    st.just(Repeat(CharClass(((0x20, 0x7E),)), 0, None)),
    st.just(Repeat(Alt((WORD, CharClass(((0x2D, 0x2E),)))), 0, None)),
)


@settings(max_examples=80, deadline=None)
@given(expr=st.recursive(string_atoms, _compound, max_leaves=6))
def test_loop_states_match_their_definition(expr):
    """loop_states (grouped by edge bounds) equals the byte-by-byte fixpoint, for both alphabets,
    and choose_slice follows from them."""
    from ministruct.engine.automaton import Automaton
    from ministruct.engine.prune import _JSON_ASCII

    auto = Automaton(Grammar({"root": Seq((expr, Repeat(Alt((IDENT, Literal(" "))), 0, None)))}))
    words = loop_states(auto, WORD_BYTES)
    strings = loop_states(auto, _JSON_ASCII)
    assert np.array_equal(words, loop_states_by_byte(auto, WORD_BYTES))
    assert np.array_equal(strings, loop_states_by_byte(auto, _JSON_ASCII))
    body = any(not any(lo <= 0x22 <= hi for lo, hi, _ in auto.byte_edges[q]) for q in np.flatnonzero(strings))
    chosen = choose_slice(auto)
    if not words.any():
        assert chosen == "json-char"
    elif not body:
        assert chosen == "word"
    elif word_loop_without_a_quote(auto, words):
        assert chosen == "word"  # (the other way, calls stepped over may see more than the bytes do)


def word_loop_without_a_quote(auto, words: np.ndarray, depth: int = 10) -> bool:
    """By stepping the automaton: does some text of at most `depth` bytes without '"' reach a
    configuration with a stack topped in a word loop? (one byte per class of the grammar)"""
    cuts = auto.byte_boundaries()
    reps = [b for b in cuts[:-1] if b != 0x22] + ([0x23] if 0x22 in cuts[:-1] and 0x23 not in cuts else [])
    frontier, seen = [auto.initial], {auto.initial}
    for _ in range(depth):
        nxt = []
        for config in frontier:
            if any(st and words[st[-1]] for st in config):
                return True
            for b in reps:
                after = auto.step(config, b)
                if after and after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier = nxt
    return any(st and words[st[-1]] for config in frontier for st in config)
