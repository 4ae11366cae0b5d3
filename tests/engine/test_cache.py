"""The on-disk cache: reused across processes, never stale, safe to delete or corrupt."""

from __future__ import annotations

import pytest

from ministruct.engine import cache
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, alt

VOCAB = Vocabulary.from_bytes([b"1", b"12", b"a", b"ab", b"b", b""], eog_ids=[5])
DIGITS = Grammar({"root": Repeat(CharClass(((0x30, 0x39),)), 2, 2)})


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MINISTRUCT_NO_CACHE", raising=False)
    return tmp_path


def walk_masks(compiled, path):
    m = Matcher(compiled)
    out = [m.mask().copy()]
    for t in path:
        m.advance(t)
        out.append(m.mask().copy())
    return out


def test_restored_state_gives_identical_masks(cache_dir):
    first = compile_grammar(DIGITS, VOCAB)
    want = walk_masks(first, [0, 0])
    first.persist()
    assert list(cache_dir.rglob("*.pkl"))
    second = compile_grammar(DIGITS, VOCAB)
    assert len(second.configs) == len(first.configs) and second._masks
    got = walk_masks(second, [0, 0])
    assert all((a == b).all() for a, b in zip(want, got))


def test_key_changes_with_grammar_vocabulary_and_engine_code():
    other_grammar = Grammar({"root": Repeat(CharClass(((0x30, 0x39),)), 3, 3)})
    other_vocab = Vocabulary.from_bytes([b"1", b"12", b"a", b"ab", b"c", b""], eog_ids=[5])
    k = cache.grammar_key(DIGITS, VOCAB.fingerprint)
    assert k != cache.grammar_key(other_grammar, VOCAB.fingerprint)
    assert k != cache.grammar_key(DIGITS, other_vocab.fingerprint)
    cache.engine_version.cache_clear()
    try:
        import ministruct.engine.cache as mod

        orig = mod._ENGINE_MODULES
        mod._ENGINE_MODULES = orig[:-1]  # a different engine source gives a different key
        assert k != cache.grammar_key(DIGITS, VOCAB.fingerprint)
    finally:
        mod._ENGINE_MODULES = orig
        cache.engine_version.cache_clear()
    assert k == cache.grammar_key(DIGITS, VOCAB.fingerprint)


def test_corrupt_and_deleted_entries_are_rebuilt(cache_dir):
    c = compile_grammar(DIGITS, VOCAB)
    want = walk_masks(c, [0])
    c.persist()
    for p in cache_dir.rglob("*.pkl"):
        p.write_bytes(b"garbage")
    got = walk_masks(compile_grammar(DIGITS, VOCAB), [0])
    assert all((a == b).all() for a, b in zip(want, got))
    import shutil

    shutil.rmtree(cache_dir)
    got = walk_masks(compile_grammar(DIGITS, VOCAB), [0])
    assert all((a == b).all() for a, b in zip(want, got))


def test_no_cache_env_writes_nothing(cache_dir, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_NO_CACHE", "1")
    c = compile_grammar(Grammar({"root": alt(Literal("a"), Literal("ab"))}), VOCAB)
    walk_masks(c, [2])
    c.persist()
    assert not list(cache_dir.rglob("*.pkl"))
