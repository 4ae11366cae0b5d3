"""Particles (issue 47): sample what the base sampler would write, given that it writes a valid output.

The *base* sampler is the model with the command's temperature, repetition penalty, top-k
and top-p applied to the raw logits (sampling.py's order without the mask: the base
truncates before any mask). The *target* is the base conditioned on its output being in
the language within `max_tokens`. Masked sampling (mask first, then renormalize each step)
draws x with probability prod_t b(x_t) / b(L_t), not b(x) / P(valid); the particles here
correct that with importance weights and resampling (sequential Monte Carlo).

Each step of a particle, with b the base step distribution and L the legal set (the
matcher's mask, budget-narrowed when the budget is near):

  - a free step draws from the proposal q and multiplies the weight by b(x) / q(x). With
    two or more particles q is b restricted to L (the ratio is b(L), the legal mass at the
    command's temperature and truncation); with one particle q is today's masked sampler
    (so its draws are today's, every seed) and the ratio is b(x) / q(x), 0 where the base
    would never draw x. Where b(L) is 0 the masked sampler proposes and the weight is 0.
  - with one particle, a dictated token (fast-forward: the grammar allows one byte
    continuation, split as the tokenizer splits it) is taken without a draw, as today's
    sampler takes it, and weighs b(x): its step's legal mass where it is the only legal
    token. Two particles or more draw every token (no fast-forward), so that each
    tokenization of a dictated stretch is a path of its own with its own mass: weighing
    one path by b(L), the mass of every tokenization, would count the others' mass on it.
  - the end: a particle that stops because the grammar is complete (nothing but
    end-of-generation is legal) weighs b(end-of-generation) at that point, unless
    `end_weight` is off (the evaluation harnesses' reading: an option's tokens without
    the final end). An end-of-generation token drawn among others is a free step.
    Stopping at `max_tokens` weighs 1 (the base, cut there, wrote the same valid text);
    an empty legal set weighs 0.

When the effective sample size (sum w)^2 / sum w^2 falls below `ess` * N the particles are
resampled (systematic) and every weight set to their mean, so that the mean final weight
is an unbiased estimate of P(valid). The output is one particle drawn by final weight.

The model is behind ParticleModel (begin, extend, copy): particles.py puts the llama.cpp
model's batched sequences behind it, the tests a table of next-token distributions.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from ministruct.decode import fast_forward as ff
from ministruct.decode.loop import Generation, Step, TokenMatcher
from ministruct.decode.sampling import Sampler, SamplingParams
from ministruct.engine.budget import output_budget
from ministruct.errors import NoLegalContinuation


class ParticleModel(Protocol):
    """What the particles need from a model: a cache per particle, extended in one batch."""

    @property
    def vocabulary(self) -> Any: ...

    def begin(self, prompt: Sequence[int], n: int) -> np.ndarray:
        """Every particle 0..n-1 holds `prompt`; the logits row after it."""
        ...

    def extend(self, work: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        """Append token t to particle i's cache for each (i, t), in one batch; the row after each."""
        ...

    def copy(self, src: int, dst: int) -> None:
        """Particle `dst`'s cache becomes a copy of particle `src`'s."""
        ...


# -- the math ------------------------------------------------------------------------


def base_step(sampler: Sampler, logits: np.ndarray, history: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """The base sampler's step distribution (ids ascending, probabilities) over the whole
    vocabulary: the command's sampler with no mask."""
    ids, probs = sampler.distribution(logits, None, history)
    order = np.argsort(ids, kind="stable")
    return ids[order], probs[order]


def mass_of(ids: np.ndarray, probs: np.ndarray, legal: np.ndarray) -> float:
    """The base's probability of the legal set (`legal`: bool over the logits rows)."""
    keep = legal[ids]
    return float(probs[keep].sum())


def prob_of(ids: np.ndarray, probs: np.ndarray, token: int) -> float:
    """The base's probability of one token (0 outside its support)."""
    i = int(np.searchsorted(ids, token))
    return float(probs[i]) if i < ids.shape[0] and ids[i] == token else 0.0


def effective_size(log_w: np.ndarray) -> float:
    """(sum w)^2 / sum w^2 of weights given as logs (0 when every weight is 0)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    m = float(np.max(log_w)) if log_w.size else -math.inf
    if not math.isfinite(m):
        return 0.0
    w = np.exp(log_w - m)
    return float(w.sum() ** 2 / (w * w).sum())


def log_mean_weight(log_w: np.ndarray) -> float:
    """log of the mean weight (-inf when every weight is 0)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    m = float(np.max(log_w))
    if not math.isfinite(m):
        return -math.inf
    return m + math.log(float(np.mean(np.exp(log_w - m))))


def systematic(log_w: np.ndarray, u: float) -> list[int]:
    """Systematic resampling: the parent of each of the N new particles, ascending, for one
    uniform `u` in [0, 1) (positions (u + i) / N on the weights' cumulative sum)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    n = log_w.shape[0]
    w = np.exp(log_w - np.max(log_w))
    cum = np.cumsum(w / w.sum())
    cum[-1] = 1.0
    pos = (u + np.arange(n)) / n
    return [int(i) for i in np.searchsorted(cum, pos, side="right")]


def draw(rng: np.random.Generator, ids: np.ndarray, probs: np.ndarray, temperature: float) -> int:
    """One id from (ids, probs), as Sampler.sample draws (one uniform number per draw)."""
    if ids.shape[0] == 1:
        if temperature > 0:
            rng.random()
        return int(ids[0])
    u = rng.random()
    cum = np.cumsum(probs)
    i = int(np.searchsorted(cum, u * cum[-1], side="right"))
    return int(ids[min(i, ids.shape[0] - 1)])


# -- the particles ----------------------------------------------------------------------


@dataclass
class Particle:
    """One particle's state: its output, matcher, weight and lineage of Steps."""

    matcher: TokenMatcher | None
    history: list[int]
    tokens: list[int] = field(default_factory=list)
    out: bytearray = field(default_factory=bytearray)
    row: np.ndarray | None = None  # the logits row after its tokens
    planned: list[int] = field(default_factory=list)  # dictated tokens still to take
    log_w: float = 0.0
    stop: str | None = None  # set when it has ended
    error: NoLegalContinuation | None = None
    steps: list[Step] = field(default_factory=list)
    n_steps: int = 0
    n_ff: int = 0
    limited_any: bool = False

    def fork(self) -> "Particle":
        m = self.matcher.fork() if self.matcher is not None else None  # type: ignore[attr-defined]
        return Particle(
            m,
            list(self.history),
            list(self.tokens),
            bytearray(self.out),
            self.row,
            list(self.planned),
            self.log_w,
            self.stop,
            self.error,
            list(self.steps),
            self.n_steps,
            self.n_ff,
            self.limited_any,
        )


@dataclass
class ParticleStats:
    """What a particles run reports beside its output (the record's fields, cli.md)."""

    method: str  # "smc" (particles) or "exact" (the language enumerated)
    n: int  # particles
    p_valid: float  # estimate of P(the base writes a valid output within the budget); exact: the sum
    log_weight: float  # the returned output's final log weight (exact: log p_valid)
    ess_min: float | None  # the smallest effective sample size seen (exact: None)
    resamples: int
    log_weights: list[list[float]] = field(default_factory=list)  # per step: every particle's log weight
    left_out: float = 0.0  # exact: base probability of the prefixes left out (an upper bound on the mass missed)

    def to_record(self) -> dict[str, Any]:
        lw = self.log_weight if math.isfinite(self.log_weight) else None  # JSON has no -Infinity
        return {
            "p_valid": self.p_valid,
            "log_weight": lw,
            "ess_min": self.ess_min,
            "resamples": self.resamples,
            "particle_method": self.method,
        }


@dataclass
class ParticleResult:
    """The returned particle's Generation and what the particles measured."""

    generation: Generation
    p_valid: float  # mean final weight: estimates P(the base writes a valid output within the budget)
    log_weight: float  # the returned particle's final log weight
    ess_min: float  # the smallest effective sample size seen (before any resampling)
    resamples: int
    steps: list[Step]  # the returned particle's steps
    weights: list[list[float]] = field(default_factory=list)  # per round: every particle's log weight
    particles: list[tuple[bytes, float]] = field(default_factory=list)  # every final particle: (output, log weight)
    method: str = "smc"


class Particles:
    """N particles over one prompt and matcher; `run()` gives the ParticleResult."""

    def __init__(
        self,
        model: ParticleModel,
        prompt_tokens: Sequence[int],
        matcher: TokenMatcher | None,
        params: SamplingParams,
        *,
        n: int,
        ess: float = 0.5,
        end_weight: bool = True,
        max_tokens: int = 256,
        budget_aware: bool = True,
        fast_forward: bool = True,
        keep_rows: bool = False,
        trace_weights: bool = False,
    ) -> None:
        self.model = model
        self.prompt = [int(t) for t in prompt_tokens]
        self.matcher = matcher
        self.params = params
        self.n = n
        self.ess = ess
        self.end_weight = end_weight
        self.max_tokens = max_tokens
        self.budget_aware = budget_aware and matcher is not None
        # one particle takes dictated stretches as today's sampler does (the same draws); two
        # or more draw every token, so that every tokenization of a stretch keeps its mass
        self.fast_forward = (
            fast_forward and n == 1 and isinstance(matcher, ff.ForcingMatcher) and hasattr(model, "tokenize_bytes")
        )
        self.keep_rows = keep_rows
        self.trace_weights = trace_weights
        self.sampler = Sampler(params)  # its rng is the one random stream of the run
        self.eog = sorted(model.vocabulary.eog_ids)

    def remaining(self, index: int) -> int | None:
        return self.max_tokens - index if self.budget_aware else None

    def run(self) -> ParticleResult:
        t0 = time.perf_counter()
        matcher = self.matcher
        if matcher is not None:
            matcher.reset()
            if self.budget_aware:
                self.budget_aware = output_budget(matcher.min_tokens_to_complete(), self.max_tokens) is not None
        row = self.model.begin(self.prompt, self.n)
        ps = [Particle(matcher, list(self.prompt), row=row)]
        ps += [ps[0].fork() for _ in range(self.n - 1)]
        ess_min, resamples, weights = float(self.n), 0, []
        while True:
            work = []
            for i, p in enumerate(ps):
                if p.stop is None:
                    token = self._advance(p)
                    if token is not None:
                        work.append((i, token))
            if work:
                rows = self.model.extend(work)
                for (i, _), r in zip(work, rows):
                    ps[i].row = r
            log_w = np.array([p.log_w for p in ps])
            if self.trace_weights:
                weights.append([float(x) for x in log_w])
            if self.n > 1:
                ess_min = min(ess_min, effective_size(log_w))
                # resampling looks at the particles still writing: an ended one carries its
                # end's factor already, the others not yet, so weighing them against each
                # other would favour whatever has not ended (the ended keep their weights)
                live = [i for i, p in enumerate(ps) if p.stop is None]
                sub = log_w[live]
                if len(live) > 1 and math.isfinite(max(sub)) and effective_size(sub) < self.ess * len(live):
                    ps = self._resample(ps, live, sub)
                    resamples += 1
            if not work and all(p.stop is not None for p in ps):
                break
        log_w = np.array([p.log_w for p in ps])
        p_valid = math.exp(log_mean_weight(log_w))
        chosen = ps[0] if self.n == 1 else ps[self._pick(log_w)]
        gen = self._generation(chosen, time.perf_counter() - t0)
        finals = [(bytes(p.out), p.log_w) for p in ps]
        return ParticleResult(gen, p_valid, chosen.log_w, ess_min, resamples, chosen.steps, weights, finals)

    # -- one particle's step ---------------------------------------------------------

    def _advance(self, p: Particle) -> int | None:
        """Take `p`'s next token (its weight updated); the token to evaluate, or None when
        `p` has ended (its stop reason set)."""
        m = p.matcher
        index = len(p.tokens)
        if index >= self.max_tokens:
            p.stop = "max_tokens"
            return None
        assert p.row is not None
        logits = p.row
        ids, probs = base_step(self.sampler, logits, p.history)
        mask = None
        limited = False
        mask_us = 0.0
        if m is not None:
            if m.is_terminated():
                return self._end(p, ids, probs)
            remaining = self.remaining(index)
            m0 = time.perf_counter()
            mask = np.asarray(m.mask(remaining), dtype=bool)
            if remaining is not None:
                full = m.mask()
                limited = mask is not full and not np.array_equal(mask, full)
            mask_us = (time.perf_counter() - m0) * 1e6
            if not mask.any():
                p.stop, p.log_w = "no_legal_continuation", -math.inf
                p.error = NoLegalContinuation(index, bytes(p.out))
                return None
            if m.is_accepting() and not self._beyond_end(mask):
                return self._end(p, ids, probs)
        dictated = False
        if self.fast_forward and mask is not None:
            if not p.planned:
                p.planned, _ = ff.plan(self.model, m, self.max_tokens - index, budget_aware=self.budget_aware)  # type: ignore[arg-type]
            if p.planned:
                token = p.planned.pop(0)
                dictated = True
                self.sampler.skip()
                p.log_w += log_of(prob_of(ids, probs, token))  # q(token) = 1
        if not dictated:
            token, factor = self._draw(p, logits, mask, ids, probs)
            p.log_w += factor
        vocab = self.model.vocabulary
        is_eog = token in vocab.eog_ids
        piece = b"" if is_eog else vocab.token_bytes(token)
        p.n_steps += 1
        p.n_ff += dictated
        p.limited_any = p.limited_any or limited
        row = logits if self.keep_rows else None
        phase = getattr(m, "phase_state", None)
        p.steps.append(Step(index, token, piece, row, mask, mask_us, limited, fast_forward=dictated, phase_state=phase))
        if is_eog:
            p.stop = "eos"
            return None
        if m is not None:
            m.advance(token)
        p.tokens.append(token)
        p.out += piece
        p.history.append(token)
        return token

    def _draw(
        self, p: Particle, logits: np.ndarray, mask: np.ndarray | None, ids: np.ndarray, probs: np.ndarray
    ) -> tuple[int, float]:
        """A free step's token and the log of its weight factor b(x) / q(x)."""
        rng, t = self.sampler.rng, self.params.temperature
        if mask is None:  # unconstrained: the proposal is the base itself
            return draw(rng, ids, probs, t), 0.0
        if self.n > 1:
            keep = mask[ids]
            z = float(probs[keep].sum())
            if z > 0:
                return draw(rng, ids[keep], probs[keep], t), math.log(z)
        q_ids, q = self.sampler.distribution(logits, mask, p.history)
        token = draw(rng, q_ids, q, t)
        b = prob_of(ids, probs, token)
        if b <= 0:
            return token, -math.inf
        qi = float(q[int(np.flatnonzero(q_ids == token)[0])])
        return token, math.log(b / qi)

    def _beyond_end(self, mask: np.ndarray) -> bool:
        """Whether anything but end-of-generation is legal."""
        if not self.eog:
            return bool(mask.any())
        rest = mask.copy()
        rest[[e for e in self.eog if e < rest.shape[0]]] = False
        return bool(rest.any())

    def _end(self, p: Particle, ids: np.ndarray, probs: np.ndarray) -> None:
        """The grammar is complete and nothing else may follow: the particle ends, weighed
        by the base's end-of-generation probability (with end_weight)."""
        if self.end_weight:
            assert p.row is not None
            eog = np.zeros(p.row.shape[0], bool)
            eog[[e for e in self.eog if e < eog.shape[0]]] = True
            p.log_w += log_of(mass_of(ids, probs, eog))
        p.stop = "grammar_done"
        return None

    def _resample(self, ps: list[Particle], live: list[int], log_w: np.ndarray) -> list[Particle]:
        """Systematic resampling of the particles `live` (their log weights `log_w`) among
        themselves: survivors keep their own cache; extra copies go to the caches of those
        dropped; each weight becomes their mean (their total is kept, so the estimates stay
        unbiased). The other particles are left as they are."""
        parents = [live[j] for j in systematic(log_w, float(self.sampler.rng.random()))]
        mean = log_mean_weight(log_w)
        counts = {i: 0 for i in live}
        for i in parents:
            counts[i] += 1
        free = [i for i in live if counts[i] == 0]
        out = list(ps)
        for i in live:
            for _ in range(counts[i] - 1):
                dst = free.pop()
                self.model.copy(i, dst)
                out[dst] = ps[i].fork()
        for i in live:
            out[i].log_w = mean
        return out

    def _pick(self, log_w: np.ndarray) -> int:
        """One particle drawn by final weight (uniformly when every weight is 0)."""
        u = float(self.sampler.rng.random())
        if not math.isfinite(float(np.max(log_w))):
            return min(int(u * self.n), self.n - 1)
        w = np.exp(log_w - np.max(log_w))
        cum = np.cumsum(w / w.sum())
        return min(int(np.searchsorted(cum, u, side="right")), self.n - 1)

    def _generation(self, p: Particle, decode_s: float) -> Generation:
        m = p.matcher
        stop = p.stop or "max_tokens"
        if m is None:
            complete = stop == "eos"
        else:
            complete = stop != "no_legal_continuation" and bool(m.is_accepting())
        return Generation(
            tokens=list(p.tokens),
            output=bytes(p.out),
            stop_reason=stop,
            complete=complete,
            prompt_tokens=list(self.prompt),
            error=p.error,
            n_steps=p.n_steps,
            decode_s=decode_s,
            budget_limited=p.limited_any,
            n_fast_forward=p.n_ff,
            phase_state=getattr(m, "phase_state", None),
        )


def log_of(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf
