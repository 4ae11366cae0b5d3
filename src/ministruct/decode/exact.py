"""The exact conditional of a small language (issue 47): every output scored under the model.

For a language small enough to enumerate (a choice, an enum, a bounded regex) the target
of smc.py, the base sampler conditioned on validity, is computed outright: the outputs
are scored most probable prefix first (each prefix one model evaluation that continues its
parent's KV cache) until the prefixes left hold a negligible share of the mass found, and
an output is drawn from the result. `small_language` tells, from the matcher alone, when
that is worth trying.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ministruct.decode.loop import Step, TokenMatcher
from ministruct.decode.sampling import Sampler, SamplingParams
from ministruct.decode.smc import base_step, log_of, mass_of, prob_of
from ministruct.engine.budget import output_budget
from ministruct.errors import NoLegalContinuation

EXACT_NODES = 256  # prefixes scored at most before a language counts as too large to enumerate
EXACT_BRANCH = 64  # legal tokens at one prefix at most
EXACT_TOLERANCE = 1e-4  # scoring stops when the prefixes not scored hold at most this share of the mass found
EXACT_SHAPE = 2048  # prefixes of every tokenization at most, for a language to be tried (no model needed)


def small_language(
    matcher: TokenMatcher,
    eog_ids: Sequence[int],
    *,
    max_tokens: int,
    budget_aware: bool = True,
    limit: int = EXACT_SHAPE,
) -> bool:
    """Whether the language within the budget may be worth scoring member by member: no
    prefix among the first `limit` (depth first, every tokenization counted) has more
    than EXACT_BRANCH legal tokens. Walks the matcher alone (no model)."""
    eog = set(int(e) for e in eog_ids)
    matcher.reset()
    if budget_aware:
        budget_aware = output_budget(matcher.min_tokens_to_complete(), max_tokens) is not None
    stack = [(0, matcher.fork())]  # type: ignore[attr-defined]
    seen = 0
    while stack:
        depth, m = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if depth >= max_tokens or m.is_terminated():
            continue
        legal = np.flatnonzero(np.asarray(m.mask(max_tokens - depth if budget_aware else None), dtype=bool))
        if legal.shape[0] > EXACT_BRANCH:
            return False
        for t in legal:
            if int(t) not in eog:
                child = m.fork()
                child.advance(int(t))
                stack.append((depth + 1, child))
    return True


@dataclass
class Enumeration:
    """Every output of a small language with the base's probability of writing it (the
    end included), and what was needed to replay one as Steps."""

    members: list[tuple[tuple[int, ...], float, float]]  # (output tokens, log base probability, log masked probability)
    left_out: float  # base probability of the prefixes not scored: an upper bound on the mass missed
    nodes: int  # prefixes scored
    seen: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None, bool]]  # prefix -> (row, mask, budget_limited)

    @property
    def p_valid(self) -> float:
        return float(sum(math.exp(lp) for _, lp, _ in self.members))

    def distribution(self, vocabulary: Any) -> dict[bytes, float]:
        """The exact conditional over output texts."""
        total = self.p_valid
        out: dict[bytes, float] = {}
        for seq, lp, _ in self.members:
            text = b"".join(vocabulary.token_bytes(t) for t in seq)
            out[text] = out.get(text, 0.0) + math.exp(lp) / total
        return out

    def masked_distribution(self, vocabulary: Any) -> dict[bytes, float]:
        """Masked sampling's output distribution (mask first, renormalized each step), where
        no top-k or top-p truncates (there it is the base restricted to each legal set);
        short of 1 by the prefixes left out."""
        out: dict[bytes, float] = {}
        for seq, _, lq in self.members:
            text = b"".join(vocabulary.token_bytes(t) for t in seq)
            out[text] = out.get(text, 0.0) + math.exp(lq)
        return out


def enumerate_language(
    row_of: Callable[[tuple[int, ...]], np.ndarray],
    prompt_tokens: Sequence[int],
    matcher: TokenMatcher,
    params: SamplingParams,
    eog_ids: Sequence[int],
    *,
    max_tokens: int,
    budget_aware: bool = True,
    end_weight: bool = True,
    max_nodes: int = EXACT_NODES,
    tolerance: float = EXACT_TOLERANCE,
) -> Enumeration | None:
    """Score the outputs of the language under the base sampler, most probable prefix
    first (`row_of(prefix)`: the logits row after the prompt and `prefix`), until the
    prefixes not scored hold at most `tolerance` times the mass of the outputs found
    (their mass bounds what they could add: `left_out`). None when the language is not
    small (more than `max_nodes` prefixes scored, or more than EXACT_BRANCH legal tokens
    at one). The same rules as Particles: the budget narrows the legal sets, an end the
    grammar dictates weighs the base's end-of-generation probability (with `end_weight`),
    `max_tokens` cuts."""
    sampler = Sampler(params)
    eog = sorted(int(e) for e in eog_ids)
    prompt = [int(t) for t in prompt_tokens]
    matcher.reset()
    if budget_aware:
        budget_aware = output_budget(matcher.min_tokens_to_complete(), max_tokens) is not None
    members: list[tuple[tuple[int, ...], float, float]] = []
    seen: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray | None, bool]] = {}
    found = 0.0  # base mass of the members
    waiting = 1.0  # base mass of the prefixes in the heap
    heap: list[tuple[float, int, tuple[int, ...], Any, float]] = [(-0.0, 0, (), matcher.fork(), 0.0)]  # type: ignore[attr-defined]
    order = 1

    def add(seq: tuple[int, ...], lp: float, lq: float) -> None:
        nonlocal found
        members.append((seq, lp, lq))
        found += math.exp(lp)

    while heap and not (found > 0 and waiting <= tolerance * found):
        neg_lp, _, seq, m, lq = heapq.heappop(heap)
        lp = -neg_lp
        waiting -= math.exp(lp)
        if len(seq) >= max_tokens:
            if m.is_accepting():
                add(seq, lp, lq)
            continue
        if len(seen) >= max_nodes:
            return None
        row = row_of(seq)
        ids, probs = base_step(sampler, row, prompt + list(seq))
        is_eog = np.zeros(row.shape[0], bool)
        is_eog[[e for e in eog if e < row.shape[0]]] = True
        end = log_of(mass_of(ids, probs, is_eog)) if end_weight else 0.0
        if m.is_terminated():
            seen[seq] = (row, None, False)
            add(seq, lp + end, lq)
            continue
        remaining = max_tokens - len(seq) if budget_aware else None
        mask = np.asarray(m.mask(remaining), dtype=bool)
        limited = remaining is not None and not np.array_equal(mask, m.mask())
        seen[seq] = (row, mask, limited)
        if m.is_accepting() and not mask[~is_eog[: mask.shape[0]]].any():
            add(seq, lp + end, lq)
            continue
        legal = np.flatnonzero(mask)
        if legal.shape[0] > EXACT_BRANCH:
            return None
        z = mass_of(ids, probs, mask)
        for t in legal:
            b = prob_of(ids, probs, int(t))
            if b <= 0:
                continue
            q = lq + math.log(b / z)
            if is_eog[t]:
                add(seq, lp + math.log(b), q)
                continue
            child = m.fork()
            child.advance(int(t))
            heapq.heappush(heap, (-(lp + math.log(b)), order, seq + (int(t),), child, q))
            order += 1
            waiting += b * math.exp(lp)
    left_out = max(0.0, waiting) if heap else 0.0
    return Enumeration(members, left_out, len(seen), seen)


def exact_draw(
    enum: Enumeration, rng: np.random.Generator, vocabulary: Any, max_tokens: int, matcher: TokenMatcher | None = None
) -> tuple[tuple[int, ...], list[Step], str, float]:
    """One output drawn from the exact conditional: (its tokens, its Steps, its stop
    reason, its log base probability). `matcher` (reset here) gives the Steps their phase."""
    if not enum.members:
        raise NoLegalContinuation(0)
    lps = np.array([lp for _, lp, _ in enum.members])
    w = np.exp(lps - lps.max())
    cum = np.cumsum(w / w.sum())
    i = min(int(np.searchsorted(cum, rng.random(), side="right")), len(enum.members) - 1)
    seq, lp, _ = enum.members[i]
    steps: list[Step] = []
    if matcher is not None:
        matcher.reset()
    for k, t in enumerate(seq):
        row, mask, limited = enum.seen[seq[:k]]
        phase = getattr(matcher, "phase_state", None)
        steps.append(Step(k, t, vocabulary.token_bytes(t), row, mask, 0.0, limited, phase_state=phase))
        if matcher is not None:
            matcher.advance(t)
    if len(seq) >= max_tokens:
        return seq, steps, "max_tokens", lp
    row, mask, limited = enum.seen[seq]
    eog = sorted(vocabulary.eog_ids)
    if mask is not None and _drew_end(mask, eog):  # the end was drawn among other tokens
        phase = getattr(matcher, "phase_state", None)
        steps.append(Step(len(seq), eog[0], b"", row, mask, 0.0, limited, phase_state=phase))
        return seq, steps, "eos", lp
    return seq, steps, "grammar_done", lp


def _drew_end(mask: np.ndarray, eog: list[int]) -> bool:
    """Whether anything but the end was legal (so the end was a draw, not dictated)."""
    rest = mask.copy()
    rest[[e for e in eog if e < rest.shape[0]]] = False
    return bool(rest.any())
