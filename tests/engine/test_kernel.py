"""The compiled walk (engine/kernel.py, engine/native.py) against the numpy walk.

The numpy walk is the reference the oracle tests (test_matcher, test_exact_*) were first
written against; here both walks run on the same tables and must find the same tokens,
the same exit nodes and the same end configurations, on random grammars and
vocabularies and on the real model's vocabulary with its slices and pruning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.engine import kernel
from ministruct.engine import walk as walk_module
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.engine.walk import walk
from ministruct.grammar.constraint import load_constraint
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq


@pytest.fixture(autouse=True, scope="module")
def _loaded():
    # walks go compiled only once the kernel is loaded (kernel.wanted): load it for the
    # comparisons below
    assert kernel.available()


def test_the_compiled_walk_is_in_use():
    # numba is a dependency: without it masks silently get several times slower
    assert kernel.available() and kernel.wanted(), kernel.failure()


def test_repeated_calls_enter_the_compiled_walk_directly():
    """After the first call with a key, the walk runs through numba's entry point of the
    version the dispatcher picked, with the same results."""
    vocab = Vocabulary.from_bytes([b"a", b"ab", b"b", b""], eog_ids=[3])
    compiled = compile_grammar(Grammar({"root": Repeat(Literal("ab"), 0, None)}), vocab, use_cache=False)
    trie, tr, bc = compiled.trie, compiled.transitions, compiled.byte_class
    root = np.zeros(1, dtype=np.int64)
    first = walk(trie, bc, tr, root, compiled.initial, compiled=True)
    entries = [e for e in kernel._entries.values() if e is not kernel.kernel()]
    assert entries, "every key still goes through the dispatcher"
    again = walk(trie, bc, tr, root, compiled.initial, compiled=True)
    _same(first, again)
    assert sorted(first.ids.tolist()) == [0, 1]


def _variants(mapped: np.ndarray) -> list:
    """Arguments of the kinds the walk passes, and near misses of each."""
    out: list = [True, False, 0, 1, 2**31, 2**62, -5, mapped, np.zeros(2, dtype=np.float64)]
    for dtype in (np.int64, np.int32, np.int8, np.uint64, bool, np.float32):
        a = np.zeros((4, 6), dtype=dtype)
        ro = a.copy()
        ro.setflags(write=False)
        out += [a, ro, a[0], a[:, 0], a.T, a[:, ::2], ro[1], np.zeros((3, 1), dtype=dtype), np.zeros(0, dtype=dtype)]
    return out


def test_argument_signatures_tell_numbas_types_apart(tmp_path):
    """kernel.signature, which picks the compiled version without numba's typing, is equal
    for two arguments only when numba types them alike."""
    import numba

    np.save(tmp_path / "a.npy", np.arange(5))
    args = _variants(np.load(tmp_path / "a.npy", mmap_mode="r"))
    for a in args:
        for b in args:
            if kernel.signature((a,)) == kernel.signature((b,)):
                assert numba.typeof(a) == numba.typeof(b), (a, b)
    assert kernel.signature((1.5,)) is None


def test_turned_off_the_walks_stay_with_numpy():
    code = (
        "from ministruct.engine import kernel\n"
        "kernel.spent(10.0)\n"
        "assert not kernel.wanted() and not kernel.available()\n"
        "print(kernel.failure())\n"
    )
    env = dict(os.environ, MINISTRUCT_NO_KERNEL="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "MINISTRUCT_NO_KERNEL" in done.stdout


def test_short_runs_do_not_load_the_kernel_and_longer_ones_load_it_without_waiting():
    """A fresh process walks with numpy until the walks have cost more than loading;
    then the load runs on its own thread and walks go on with numpy until it is done.
    (The load waits for the test's word: a fast load must not finish before the check.)"""
    code = (
        "import threading\n"
        "from ministruct.engine import kernel\n"
        "gate, build = threading.Event(), kernel._build\n"
        "kernel._build = lambda: (gate.wait(), build())[1]\n"
        "assert not kernel.wanted() and 'walk' not in kernel._state and not kernel._loader\n"
        "kernel.spent(kernel.LOAD_AFTER_S)\n"
        "assert not kernel.wanted() and kernel._loader\n"
        "gate.set()\n"
        "kernel._loader[0].join()\n"
        "assert kernel.wanted() and kernel._state['walk'] is not None\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.model
def test_masks_are_the_same_when_the_kernel_arrives_mid_walk():
    """A fresh process whose compiled walk loads in the background during a random walk
    gives the same masks, step for step, as one that walks with numpy throughout. (The
    load waits for the walk's step 40, whatever the machine's speed.)"""
    code = (
        "import hashlib, sys, threading\n"
        "from ministruct.engine import kernel\n"
        "gate, build = threading.Event(), kernel._build\n"
        "kernel._build = lambda: (gate.wait(), build())[1]\n"
        "from ministruct.decode.model import Model\n"
        "from ministruct.diagnostics.bench import random_walk\n"
        "from ministruct.engine.compile import compile_grammar\n"
        "from ministruct.grammar.constraint import load_constraint\n"
        "kernel.LOAD_AFTER_S = 0.0\n"
        "vocab = Model.load(vocab_only=True).vocabulary\n"
        "c = compile_grammar(load_constraint(schema='samples/conj.json').grammar, vocab, use_cache=False)\n"
        "h = hashlib.sha256()\n"
        "seen = []\n"
        "def step(i, m):\n"
        "    h.update(m.tobytes())\n"
        "    if i in (0, 60):\n"
        "        seen.append(kernel._state.get('walk') is not None)\n"
        "    if i == 40 and kernel._loader:\n"
        "        gate.set()\n"
        "        kernel._loader[0].join()\n"
        "random_walk(c, 150, seed=3, on_step=step)\n"
        "print(h.hexdigest(), *seen)\n"
    )
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    runs = {}
    for off in ("0", "1"):
        env = dict(os.environ, MINISTRUCT_NO_KERNEL=off)
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300, env=env
        )
        assert done.returncode == 0, done.stderr
        runs[off] = done.stdout.split()
    assert runs["0"][1:] == ["False", "True"] and runs["1"][1:] == ["False", "False"]  # loaded mid-walk / never
    assert runs["0"][0] == runs["1"][0]


@contextmanager
def numpy_walks():
    """Walks inside this block take the numpy path."""
    saved = walk_module.kernel.wanted
    walk_module.kernel.wanted = lambda: False
    try:
        yield
    finally:
        walk_module.kernel.wanted = saved


def _same(a, b) -> None:
    assert np.array_equal(np.unique(a.ids), np.unique(b.ids))
    assert np.array_equal(np.sort(a.exits), np.sort(b.exits))


ALPHABET = 'ab1"é'
atoms = st.one_of(
    st.text(alphabet=ALPHABET, min_size=1, max_size=3).map(Literal),
    st.sampled_from([CharClass(((0x61, 0x62),)), CharClass(((0x22, 0x22),), negated=True)]),
)


def _compound(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: Seq(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 3) | st.none()).map(
            lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])
        ),
    )


exprs = st.recursive(atoms, _compound, max_leaves=6)
tokens = st.lists(st.text(alphabet=ALPHABET + "x", min_size=1, max_size=5), min_size=1, max_size=40, unique=True)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs, toks=tokens, path=st.lists(st.integers(0, 1000), max_size=5))
def test_compiled_walk_equals_numpy_walk(expr, toks, path):
    vocab = Vocabulary.from_bytes([t.encode() for t in toks] + [b""], eog_ids=[len(toks)])
    compiled = compile_grammar(Grammar({"root": expr}), vocab, use_cache=False)
    matcher = Matcher(compiled)
    trie, tr, bc = compiled.trie, compiled.transitions, compiled.byte_class
    root = np.zeros(1, dtype=np.int64)
    for choice in [*path, None]:
        cid = matcher.state
        t_fast = np.zeros(vocab.n_logits, dtype=np.int32)
        t_slow = np.zeros(vocab.n_logits, dtype=np.int32)
        fast = walk(trie, bc, tr, root, cid, t_fast, compiled=True)
        slow = walk(trie, bc, tr, root, cid, t_slow, compiled=False)
        _same(fast, slow)
        assert np.array_equal(t_fast, t_slow)
        if len(fast.exits):  # a walk that starts where another one left off
            _same(
                walk(trie, bc, tr, fast.exits, cid, compiled=True),
                walk(trie, bc, tr, fast.exits, cid, compiled=False),
            )
        legal = [t for t in np.flatnonzero(matcher.mask()).tolist() if t != len(toks)]
        if choice is None or not legal:
            break
        matcher.advance(legal[choice % len(legal)])


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "code": {"type": "string", "pattern": "[A-Z]{2}-[0-9]+"},
        "level": {"enum": ["info", "warning", "error"]},
        "note": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "maxItems": 3},
    },
    "required": ["name", "level"],
}


@pytest.fixture(params=[64, 1], ids=["room", "outgrown"])
def first_room(request, monkeypatch):
    """The compiled walk's first room for exits, blocked nodes, asked rows and slice
    tails; with 1, every one of those arrays grows in mid-walk and the walk resumes."""
    monkeypatch.setattr(walk_module, "FIRST_ROOM", request.param)
    return request.param


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masks_agree_on_the_real_vocabulary(vocab, tmp_path, seed, first_room):
    """Slices, pruning and several walks per mask, on 49k tokens: the same masks."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    grammar = load_constraint(schema=str(path)).grammar
    fast = Matcher(compile_grammar(grammar, vocab, use_cache=False))
    slow = Matcher(compile_grammar(grammar, vocab, use_cache=False))
    rng = np.random.default_rng(seed)
    for _ in range(40):
        a = fast.mask()
        with numpy_walks():
            b = slow.mask()
        assert np.array_equal(a, b)
        legal = np.flatnonzero(a)
        token = int(legal[rng.integers(legal.size)])
        if token in vocab.eog_ids:
            break
        fast.advance(token)
        slow.advance(token)


# a quoted key that is one of two names or any text: no slice decides it as a whole
NAME_OR_TEXT = Grammar(
    {
        "root": Seq(
            (
                Literal('"'),
                Alt((Literal("alpha"), Literal("beta"), Repeat(CharClass(((0x22, 0x22),), negated=True), 0, None))),
                Literal('"'),
            )
        )
    }
)


def test_alternation_of_a_string_and_literals_walks_the_same(vocab):
    """A configuration no slice decides (a key that is free text or one of some names):
    the walk prunes below nodes the slice decides for good, in both walks alike."""
    grammar = NAME_OR_TEXT
    fast = compile_grammar(grammar, vocab, use_cache=False)
    slow = compile_grammar(grammar, vocab, use_cache=False)
    for text in (b'"', b'"al', b'"be', b'"xyz'):
        a = fast.mask(fast.step_bytes(fast.initial, text))
        with numpy_walks():
            b = slow.mask(slow.step_bytes(slow.initial, text))
        assert np.array_equal(a, b), text


@pytest.mark.parametrize("with_quote", [False, True])
def test_pruned_walk_takes_whole_subtrees_alike(with_quote, first_room):
    """A subtree of thousands of tokens that only string characters spell, below a node
    where the configuration is a plain string body: both walks take it without walking
    it (or walk on, when a token below leaves the string), and agree with the oracle."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    body = [f"z{a}{b}{c}" for a in letters for b in letters[:12] for c in letters[:10]]  # 3120 tokens
    extra = ["al", "alpha", "be", '"', "x", "z", 'zab"', 'ab"'] if with_quote else ["al", "be", '"', "x", "z"]
    toks = body + extra
    vocab = Vocabulary.from_bytes([t.encode() for t in toks] + [b""], eog_ids=[len(toks)])
    grammar = NAME_OR_TEXT
    fast = compile_grammar(grammar, vocab, use_cache=False)
    slow = compile_grammar(grammar, vocab, use_cache=False)
    for text in (b'"', b'"al', b'"z'):
        a = fast.mask(fast.step_bytes(fast.initial, text))
        with numpy_walks():
            b = slow.mask(slow.step_bytes(slow.initial, text))
        assert np.array_equal(a, b), text
        # every body token continues a string: legal after an opening quote
        assert a[: len(body)].all(), text


def test_a_damaged_numba_cache_is_cleared_and_rebuilt_with_one_warning(tmp_path):
    # issue 29: numba's cache files are pickles; a damaged one turned the compiled walk off
    # in every later process, without a word (masks about 2x slower)
    import shutil

    from ministruct.engine.cache import cache_dir

    ours = cache_dir() / "numba"
    assert ours.is_dir() and any(ours.iterdir())  # built by the module's fixture
    copy = tmp_path / "engine" / "numba"
    shutil.copytree(ours, copy)
    for f in copy.rglob("*.nb[ic]"):
        f.write_bytes(b"Z" + f.read_bytes()[1:])  # not a pickle any more
    env = {**os.environ, "MINISTRUCT_CACHE_DIR": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    code = "from ministruct.engine import kernel; print(kernel.kernel() is not None, kernel.failure())"
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env) for _ in "12"
    ]
    assert [r.stdout.strip() for r in runs] == ["True None", "True None"], [r.stderr for r in runs]
    (warning,) = runs[0].stderr.strip().splitlines()
    assert warning.startswith(f"ministruct: warning: the compiled walk's cache in {copy} did not load (")
    assert runs[1].stderr == ""  # rebuilt: the next process loads it quietly
