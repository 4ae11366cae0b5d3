"""The on-disk cache: reused across processes, never stale, safe to delete or corrupt."""

from __future__ import annotations

import pytest

from ministruct.engine import cache
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, alt, seq

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
    assert list(cache_dir.rglob("*.msc"))
    second = compile_grammar(DIGITS, VOCAB)
    assert len(second.configs) == len(first.configs)
    assert second.stats()["masks_cached"] == first.stats()["masks_cached"] > 0
    got = walk_masks(second, [0, 0])
    assert all((a == b).all() for a, b in zip(want, got))


TWO_WAYS = Grammar(
    {"root": alt(seq(Literal("1"), CharClass(((0x30, 0x39),))), seq(Literal("a"), CharClass(((0x61, 0x62),))))}
)


def _not_walked(compiled, monkeypatch):
    def refuse(cid):
        raise AssertionError(f"mask of configuration {cid} walked, not read from the cache")

    monkeypatch.setattr(compiled, "_compute_mask", refuse)


def test_restored_masks_a_run_did_not_use_are_kept_when_it_saves(cache_dir, monkeypatch):
    first = compile_grammar(TWO_WAYS, VOCAB)
    digit_way = walk_masks(first, [0])  # "1", then a digit
    first.persist()
    second = compile_grammar(TWO_WAYS, VOCAB)  # uses only the first mask, learns the other way
    assert (Matcher(second).mask() == digit_way[0]).all()
    letter_way = walk_masks(second, [2])  # "a", then a or b
    second.persist()
    third = compile_grammar(TWO_WAYS, VOCAB)
    _not_walked(third, monkeypatch)
    for path, want in (([0], digit_way), ([2], letter_way)):
        got = walk_masks(third, path)
        assert all((a == b).all() for a, b in zip(want, got))
    assert not any(m.flags.writeable for m in third._masks.values())


def test_key_changes_with_grammar_vocabulary_and_engine_code():
    other_grammar = Grammar({"root": Repeat(CharClass(((0x30, 0x39),)), 3, 3)})
    other_vocab = Vocabulary.from_bytes([b"1", b"12", b"a", b"ab", b"c", b""], eog_ids=[5])
    k = cache.grammar_key(DIGITS, VOCAB.fingerprint)
    assert k != cache.grammar_key(other_grammar, VOCAB.fingerprint)
    assert k != cache.grammar_key(DIGITS, other_vocab.fingerprint)


@pytest.fixture
def engine_copy(tmp_path, monkeypatch):
    """The engine's sources copied to a folder whose bytes a test may change."""
    import shutil

    src = cache.engine_sources()
    copies = []
    for i, p in enumerate(src):
        q = tmp_path / "src" / f"{i:02d}" / p.name
        q.parent.mkdir(parents=True)
        shutil.copyfile(p, q)
        copies.append(q)
    monkeypatch.setattr(cache, "engine_sources", lambda: list(copies))
    cache.engine_version.cache_clear()
    yield copies
    cache.engine_version.cache_clear()


def test_the_version_covers_every_engine_source():
    from pathlib import Path

    engine = Path(cache.__file__).resolve().parent
    names = {p.name for p in cache.engine_sources() if p.parent == engine}
    assert names == {p.name for p in engine.glob("*.py")}
    assert {"table.py", "token_edges.py", "native.py", "kernel.py", "walk.py"} <= names


def test_changing_any_engine_source_changes_the_version(engine_copy):
    before = cache.engine_version()
    for p in engine_copy:
        data = p.read_bytes()
        p.write_bytes(data + b"\n# changed\n")
        cache.engine_version.cache_clear()
        assert cache.engine_version() != before, p.name
        p.write_bytes(data)
        cache.engine_version.cache_clear()
        assert cache.engine_version() == before


def test_an_entry_of_an_older_engine_is_rebuilt_not_read(cache_dir, engine_copy):
    first = compile_grammar(DIGITS, VOCAB)
    want = walk_masks(first, [0, 0])
    first.persist()
    written = set(cache_dir.rglob("*.msc"))
    assert written
    table = next(p for p in engine_copy if p.name == "table.py")
    table.write_bytes(table.read_bytes() + b"\n# what the table persists changed\n")
    cache.engine_version.cache_clear()
    second = compile_grammar(DIGITS, VOCAB)
    assert second.stats()["masks_cached"] == 0, "an entry written under the old engine version was read"
    got = walk_masks(second, [0, 0])
    assert all((a == b).all() for a, b in zip(want, got))
    second.persist()
    assert set(cache_dir.rglob("*.msc")) - written, "no entry was written under the new version"


def test_corrupt_and_deleted_entries_are_rebuilt(cache_dir):
    c = compile_grammar(DIGITS, VOCAB)
    want = walk_masks(c, [0])
    c.persist()
    for p in cache_dir.rglob("*.msc"):
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
    assert not list(cache_dir.rglob("*.msc"))


# ------------------------------------------------------------------ damaged entries (data, never code)

import os  # noqa: E402
import pickle  # noqa: E402

import numpy as np  # noqa: E402

from ministruct.engine import slices  # noqa: E402


def flip_bytes(p):
    data = bytearray(p.read_bytes())
    for i in range(len(data) // 3, len(data), max(1, len(data) // 7)):
        data[i] ^= 0x5A
    p.write_bytes(bytes(data))


def truncate(p):
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) * 2 // 3])


def garbage(p):
    p.write_bytes(os.urandom(300))


class Boom:
    """Unpickling this runs code: the cache must never do it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def evil(p):
    p.write_bytes(pickle.dumps(Boom(str(p.parent / "pwned"))))


def entries(cache_dir, kind):
    return sorted((cache_dir / "engine" / kind).glob("*.msc"))


@pytest.mark.parametrize("damage", [flip_bytes, truncate, garbage, evil], ids=lambda f: f.__name__)
def test_damaged_grammar_entry_is_detected_and_rebuilt(cache_dir, damage):
    c = compile_grammar(DIGITS, VOCAB)
    want = walk_masks(c, [0, 0])
    c.persist()
    (path,) = entries(cache_dir, "grammar")
    good = path.read_bytes()
    damage(path)
    again = compile_grammar(DIGITS, VOCAB)  # must not raise
    assert again.stats()["masks_cached"] == 0  # nothing was taken from the damaged entry
    assert not path.exists()  # the damaged entry was dropped ...
    got = walk_masks(again, [0, 0])
    assert all((a == b).all() for a, b in zip(want, got))
    again.persist()
    assert path.read_bytes() == good  # ... and rebuilt
    assert not (path.parent / "pwned").exists()
    assert compile_grammar(DIGITS, VOCAB).stats()["masks_cached"] > 0  # and read back


@pytest.mark.parametrize("damage", [flip_bytes, truncate, garbage, evil], ids=lambda f: f.__name__)
def test_damaged_vocabulary_index_is_detected_and_rebuilt(cache_dir, damage, monkeypatch):
    vocab = Vocabulary.from_bytes([b"1", b"12", b"a", b"ab", b'"x', b"\xc3", b""], eog_ids=[6])
    monkeypatch.setattr(slices, "_INDEX", {})
    want = walk_masks(compile_grammar(DIGITS, vocab, use_cache=False), [0, 0])
    (path,) = entries(cache_dir, "trie")
    good = path.read_bytes()
    damage(path)
    monkeypatch.setattr(slices, "_INDEX", {})  # a new process: the index comes from disk
    got = walk_masks(compile_grammar(DIGITS, vocab, use_cache=False), [0, 0])
    assert all((a == b).all() for a, b in zip(want, got))
    assert path.read_bytes() == good
    assert not (path.parent / "pwned").exists()


def test_entries_hold_plain_arrays_and_round_trip(cache_dir):
    arrays = {"a": np.arange(5, dtype=np.int32), "b": np.zeros((2, 3), dtype=bool), "e": np.zeros(0, np.int64)}
    cache.save("test", "k", arrays, {"x": [1, "y"]})
    entry = cache.load("test", "k")
    assert entry.meta == {"x": [1, "y"]}
    assert set(entry.arrays) == {"a", "b", "e"}
    for k, v in arrays.items():
        assert entry.arrays[k].dtype == v.dtype and (entry.arrays[k] == v).all()
        assert not entry.arrays[k].flags.writeable
    with pytest.raises(TypeError):
        cache.save("test", "obj", {"o": np.asarray([object()], dtype=object)})


def test_an_intact_entry_of_another_grammar_is_refused_and_changes_nothing(cache_dir):
    other = Grammar({"root": alt(Literal("ab"), Literal("b"))})
    a = compile_grammar(other, VOCAB)
    walk_masks(a, [2])
    a.persist()
    (src,) = entries(cache_dir, "grammar")
    dst = src.parent / f"{cache.grammar_key(DIGITS, VOCAB.fingerprint)}{cache.SUFFIX}"
    dst.write_bytes(src.read_bytes())  # a well-formed entry, under the wrong key
    want = walk_masks(compile_grammar(DIGITS, VOCAB, use_cache=False), [0, 0])
    got = walk_masks(compile_grammar(DIGITS, VOCAB), [0, 0])
    assert all((x == y).all() for x, y in zip(want, got))
    assert not dst.exists()


def test_the_vocabulary_index_is_read_back_not_rebuilt(cache_dir, monkeypatch):
    import random

    rng = random.Random(3)
    toks = sorted({bytes(rng.choice(b'ab"\\ 1\xc3\xa9\n') for _ in range(rng.randint(1, 6))) for _ in range(300)})
    vocab = Vocabulary.from_bytes(toks + [b""], eog_ids=[len(toks)])
    monkeypatch.setattr(slices, "_INDEX", {})
    built = slices.index_for(vocab)
    monkeypatch.setattr(slices, "_INDEX", {})

    def refuse(_):
        raise AssertionError("the index was rebuilt instead of read from the cache")

    monkeypatch.setattr(slices, "build_index", refuse)
    loaded = slices.index_for(vocab)
    for name in ("node_byte", "child_start", "child_count", "node_token", "tok_lo", "sorted_ids"):
        assert (getattr(loaded.trie, name) == getattr(built.trie, name)).all()
    assert (loaded.slices["json-char"].length == built.slices["json-char"].length).all()


def test_budget_needs_are_saved_so_a_later_run_narrows_without_walking(cache_dir):
    """What the budget learned (the largest need of each configuration) is saved with the
    grammar: a fresh compile narrows with a long budget by lookup alone, gives the same
    masks for every budget, and computes the full need only when the budget is short."""
    from ministruct.engine.budget import budget_for

    g = Grammar({"root": alt(Repeat(CharClass(((0x30, 0x39),)), 1, 6), Repeat(Literal("ab"), 1, 3))})
    first = compile_grammar(g, VOCAB)
    m = Matcher(first)
    want = {r: m.mask(r).copy() for r in (1, 2, 3, 50)}
    first.persist()
    second = compile_grammar(g, VOCAB)
    budget = budget_for(second)
    m2 = Matcher(second)
    assert m2.mask_ready(50) and not budget.has_need(m2.state)
    assert (m2.mask(50) == want[50]).all() and not budget.has_need(m2.state)  # a lookup, no walk
    assert not m2.mask_ready(1)  # too short for what is known: the need is computed
    assert all((m2.mask(r) == want[r]).all() for r in (1, 2, 3))
    assert budget.has_need(m2.state)
    # nothing new was learned on top of what was restored: nothing to save again
    third = compile_grammar(g, VOCAB)
    Matcher(third).mask(50)
    before = sorted(cache_dir.rglob("*.msc"), key=lambda p: p.stat().st_mtime_ns)[-1].stat().st_mtime_ns
    third.persist()
    assert sorted(cache_dir.rglob("*.msc"), key=lambda p: p.stat().st_mtime_ns)[-1].stat().st_mtime_ns == before


def test_past_its_size_limit_the_least_recently_used_entries_go(cache_dir, monkeypatch):
    """Entries of older engine versions are never read again: the cache keeps to
    $MINISTRUCT_CACHE_MAX_MB by deleting what was used longest ago, not what was just read."""
    import os

    block = {"a": np.zeros(100_000, dtype=np.uint8)}  # about 0.1 MB an entry
    for i, kind in enumerate(["trie", "grammar", "trie", "vocab"]):
        cache.save(kind, f"k{i}", block)
        os.utime(cache.entry_path(kind, f"k{i}"), (1000 + i, 1000 + i))  # k0 oldest
    assert cache.load("trie", "k0") is not None  # read: now the most recently used
    monkeypatch.setenv("MINISTRUCT_CACHE_MAX_MB", "0.35")  # room for three
    cache.save("grammar", "k4", block)
    left = {p.stem for p in cache_dir.glob("engine/*/*.msc")}
    assert left == {"k0", "k3", "k4"}
    assert sum(p.stat().st_size for p in cache_dir.glob("engine/*/*.msc")) <= 0.35 * 1024 * 1024
    monkeypatch.setenv("MINISTRUCT_CACHE_MAX_MB", "0")  # the entry just written is never deleted
    cache.save("trie", "k5", block)
    assert {p.stem for p in cache_dir.glob("engine/*/*.msc")} == {"k5"}
