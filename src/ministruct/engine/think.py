"""Phases of a free-text-first grammar (grammar/think.py): which part a configuration is
in, and the legal set once the thinking budget is spent.

The phase is a function of the output so far: `think` until the first CLOSE (its bytes,
matched with the same Knuth-Morris-Pratt automaton the grammar is built from, or the one
control token), `answer` after it. `PhaseTracker` follows it token by token, with one
small state per accepted token, so the matcher can roll back and fork.

Once `think_tokens` tokens are spent in the thinking, only tokens that move toward
CLOSE stay legal: tokens whose bytes are a prefix of the rest of CLOSE, or the rest of
CLOSE followed by answer bytes the grammar allows (the exact mask decides those); with a
control token CLOSE, that token. The rest of CLOSE (and what the answer dictates after
it) becomes the forced bytes, so the decoder fast-forwards it. With a grammar of its
own for the free text (the free text need not be ready for CLOSE yet), only tokens that
bring a complete output strictly nearer (engine/budget.py's bound) stay legal.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

import numpy as np

from ministruct.engine.budget import budget_for
from ministruct.engine.compile import DEAD, CompiledGrammar
from ministruct.engine.forced import forced_for
from ministruct.errors import UsageError
from ministruct.grammar.ir import Boundary
from ministruct.grammar.think import kmp_table

THINK, ANSWER = "think", "answer"


@dataclass(frozen=True)
class PhaseState:
    """After some tokens: the phase, how much of CLOSE the text ends with, thinking
    tokens spent, where the answer starts in the output (bytes) and how the thinking ended."""

    phase: str = THINK
    matched: int = 0
    think_tokens: int = 0
    out_len: int = 0
    answer_start: int | None = None
    think_end: str | None = None  # "closed" | "budget"


class Boundaries:
    """The per-grammar part: CLOSE's bytes or token id, its matching table, and the
    tokens that move toward CLOSE from each matched length (built on first use)."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        b = compiled.grammar.boundary
        if b is None:
            raise ValueError("the grammar has no free-text boundary")
        self.compiled = compiled
        self.boundary: Boundary = b
        vocab = compiled.vocab
        self.close_id: int | None = None
        self.close_bytes = b""
        if isinstance(b.close, str):
            self.close_bytes = b.close.encode("utf-8")
            self._table = kmp_table(self.close_bytes.decode("latin-1"))  # one code point per byte
        else:
            tid = b.close.token_id if b.close.token_id is not None else vocab.id_of_control(b.close.name or "")
            if tid is None:
                raise UsageError(f"the vocabulary has no control token {b.close_text!r} to end the thinking")
            self.close_id = int(tid)
        self._toward: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def step(self, state: PhaseState, token_id: int, data: bytes, spent_before: bool) -> PhaseState:
        """The state after one accepted token with bytes `data`."""
        out_len = state.out_len + len(data)
        if state.phase == ANSWER:
            return PhaseState(ANSWER, 0, state.think_tokens, out_len, state.answer_start, state.think_end)
        spent = state.think_tokens + 1
        end = "budget" if spent_before else "closed"
        if self.close_id is not None:
            if token_id == self.close_id:
                return PhaseState(ANSWER, 0, spent, out_len, out_len, end)
            return PhaseState(THINK, 0, spent, out_len)
        j = state.matched
        n = len(self.close_bytes)
        for i, byte in enumerate(data):
            j = self._table[j].get(byte, 0)
            if j == n:
                return PhaseState(ANSWER, 0, spent, out_len, state.out_len + i + 1, end)
        return PhaseState(THINK, j, spent, out_len)

    def toward(self, matched: int) -> np.ndarray:
        """bool per logits row: tokens that move toward CLOSE after `matched` of its bytes
        (a prefix of the rest, or the rest and then anything; the exact mask decides the
        anything)."""
        with self._lock:
            hit = self._toward.get(matched)
            if hit is not None:
                return hit
            vocab = self.compiled.vocab
            out = np.zeros(vocab.n_logits, dtype=bool)
            if self.close_id is not None:
                out[self.close_id] = True
            else:
                out[self._toward_ids(self.close_bytes[matched:])] = True
            out[list(vocab.eog_ids)] = True  # the grammar's own mask decides end-of-generation
            out.setflags(write=False)
            self._toward[matched] = out
            return out

    def _toward_ids(self, rest: bytes) -> list[int]:
        """Text tokens that are a prefix of `rest` or start with it (bisect in the tokens sorted by bytes)."""
        if not hasattr(self, "_sorted"):
            vocab = self.compiled.vocab
            pairs = sorted((vocab.tokens[t], t) for t in vocab.text_ids.tolist())
            self._sorted = ([p[0] for p in pairs], [p[1] for p in pairs])
        keys, ids = self._sorted
        out = []
        lo = bisect.bisect_left(keys, rest)
        while lo < len(keys) and keys[lo].startswith(rest):
            out.append(ids[lo])
            lo += 1
        for k in range(1, len(rest)):
            i = bisect.bisect_left(keys, rest[:k])
            while i < len(keys) and keys[i] == rest[:k]:
                out.append(ids[i])
                i += 1
        return out

    def narrow_spent(self, cid: int, matched: int, mask: np.ndarray) -> np.ndarray:
        """The legal set of `cid` once the thinking budget is spent."""
        if self.boundary.free_grammar:
            cost = budget_for(self.compiled).config_cost(cid)
            return budget_for(self.compiled).narrow(cid, mask, cost)
        out = mask & self.toward(matched)
        out.setflags(write=False)
        return out

    def forced_spent(self, cid: int, matched: int) -> bytes:
        """The bytes dictated once the thinking budget is spent: the rest of CLOSE and what
        the grammar dictates after it (b"" for a control token CLOSE)."""
        forced = forced_for(self.compiled)
        if self.close_id is not None or self.boundary.free_grammar:
            return forced.forced(cid)
        rest = self.close_bytes[matched:]
        after = self.compiled.step_bytes(cid, rest)
        if after == DEAD:
            return forced.forced(cid)
        return rest + forced.forced(after)


def boundaries_for(compiled: CompiledGrammar) -> Boundaries | None:
    """The Boundaries of a free-text-first grammar (None for any other), kept with it."""
    if compiled.grammar.boundary is None:
        return None
    return compiled.companion("boundaries", Boundaries)


__all__ = ["ANSWER", "THINK", "Boundaries", "PhaseState", "boundaries_for"]
