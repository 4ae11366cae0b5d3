"""Configurations kept as unions of smaller ones (Transitions.parts): their masks are the
unions of the parts' masks (CompiledGrammar._union_mask), and the compiled walk walks a
union's subtree from each part instead of filling the union's row (native.walk_kernel's
use_forks). Masks stay the exact legal set (brute force over Automaton.step_bytes), with
and without either, in both walks."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from oracles import brute_force_mask, small_vocabulary  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine import compile as compile_module
from ministruct.engine import kernel as kernel_module
from ministruct.engine import walk as walk_module
from ministruct.engine.compile import compile_grammar
from ministruct.engine.table import DEAD
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint

# keywords next to names with gaps that may be empty: `aFROMb` parses, so a name leaves
# dozens of parses alive, and the configurations of its characters are unions
SQL = r"""
%import common.WS
%import common.CNAME
%ignore WS
start: SELECT item ("," item)* FROM name [WHERE name "=" name]
item: name ["." name] [[AS] name]
name: CNAME
SELECT: "SELECT"i
FROM: "FROM"i
AS: "AS"i
WHERE: "WHERE"i
"""
CHARS = "aesfrmoliwhctnx_1 ,.="


def vocabulary(seed: int) -> Vocabulary:
    words = ("SELECT", "select ", "FROM", " from", "AS", " as ", "Where", "fro", "sel", "ect")
    return small_vocabulary(seed, CHARS, words, "aesfrmoliwhctnx_1", 400, 0.7, 7)


def walk_masks(vocab: Vocabulary, seed: int, steps: int = 30) -> dict[str, int]:
    """Masks along a random path against brute force; counts of union masks and forks."""
    counts = {"unions": 0, "forks": 0}
    c = compile_grammar(Constraint.from_lark(SQL, lexer="cfl").grammar, vocab, use_cache=False)
    union_mask = c._union_mask

    def counted_union(union_of):
        counts["unions"] += 1
        return union_mask(union_of)

    call = kernel_module.call

    def counted_call(key, args):
        out = call(key, args)
        counts["forks"] += int(out[6])
        return out

    c._union_mask = counted_union
    rng = random.Random(seed)
    cid = c.initial
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernel_module, "call", counted_call)
        for _ in range(steps):
            m = c.mask(cid)
            want = brute_force_mask(c, cid)
            assert np.array_equal(m, want), (np.flatnonzero(m != want)[:10], sorted(c.configs[cid]))
            legal = [t for t in np.flatnonzero(m).tolist() if t not in c.vocab.eog_ids]
            if not legal:
                break
            cid = c.step_token(cid, rng.choice(legal))
            assert cid != DEAD
    return counts


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("forks", [True, False])
@pytest.mark.parametrize("unions", [True, False])
def test_union_masks_and_forks_keep_masks_exact(compiled, forks, unions, monkeypatch):
    if compiled and not kernel_module.available():
        pytest.skip(f"no compiled walk: {kernel_module.failure()}")
    monkeypatch.setattr(walk_module.kernel, "wanted", lambda: compiled)
    monkeypatch.setattr(walk_module, "FORKS", forks)
    if not unions:
        monkeypatch.setattr(compile_module, "MAX_UNION_DEPTH", 0)
    total = {"unions": 0, "forks": 0}
    for seed in range(3):
        for k, v in walk_masks(vocabulary(seed), seed).items():
            total[k] += v
    assert (total["unions"] > 0) == unions  # the paths under test were taken
    assert (total["forks"] > 0) == (forks and compiled)


def test_nested_unions_make_no_masks_of_their_own():
    """A union whose parts are unions adds their parts' masks: the only masks made are the
    ones asked for and those of parts that are no union (each new mask is fresh pages),
    and every mask is still the exact legal set."""
    text = (Path(__file__).resolve().parents[2] / "benchmarks" / "grammars" / "sql_select.lark").read_text()
    nested = 0
    for seed in range(3):
        vocab = vocabulary(seed)
        c = compile_grammar(Constraint.from_lark(text, lexer="cfl").grammar, vocab, use_cache=False)
        rng = random.Random(seed)
        cid, asked = c.initial, set()
        for _ in range(40):
            m = c.mask(cid)
            asked.add(int(c.transitions.canon[cid]))
            assert np.array_equal(m, brute_force_mask(c, cid))
            legal = [t for t in np.flatnonzero(m).tolist() if t not in c.vocab.eog_ids]
            if not legal:
                break
            cid = c.step_token(cid, rng.choice(legal))
        parts = c.transitions.parts
        nested += sum(1 for u in asked if u in parts for p in parts[u] if p in parts)
        made = set(c._masks) | set(c._packed)
        assert all(k in asked or k not in parts for k in made), sorted(k for k in made if k not in asked and k in parts)
    assert nested > 0  # (the walks met unions of unions)
