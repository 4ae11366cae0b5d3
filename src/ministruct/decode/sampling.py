"""The sampler, in the order of diagnostics.md.

mask -> temperature -> repetition penalty -> softmax -> top-k -> top-p -> draw.
Temperature 0 is greedy (argmax over the legal set, ties to the lowest id).
The pure helpers (masked_logits, softmax, nucleus, and the legal mass Z_t: legal_kl,
legal_mass) are shared with diagnostics and the fight warnings.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from ministruct.errors import NoLegalContinuation, UsageError

# Partial-sort sizes tried before a full sort when looking for a nucleus / top-k.
_CANDIDATE_RATIOS = (1e-2, 1e-4, 1e-8)  # candidate cut-offs relative to the top probability
MAX_PARTICLES = 64  # each particle holds a KV cache as long as the prompt and the budget


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings; validated on construction (UsageError names the parameter)."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    repeat_penalty: float = 1.0  # 1.0 = off
    seed: int = 0
    repeat_last_n: int = 64  # how many recent tokens the penalty looks at (llama.cpp default)
    # particles (decode/smc.py, docs/sampling.md): None samples as above, mask first; N >= 1
    # samples the base sampler conditioned on validity and reports p_valid
    particles: int | None = None
    ess: float = 0.5  # resample when the effective sample size falls below ess * particles
    end_weight: bool = True  # an end the grammar dictates weighs the model's end-of-generation probability

    def __post_init__(self) -> None:
        t, p = self.temperature, self.top_p
        if not isinstance(t, (int, float)) or math.isnan(t) or t < 0 or math.isinf(t):
            raise UsageError(f"temperature must be >= 0, got {t}", parameter="temperature")
        if not isinstance(p, (int, float)) or math.isnan(p) or not 0 < p <= 1:
            raise UsageError(f"top_p must be in (0, 1], got {p}", parameter="top_p")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise UsageError(f"top_k must be an integer >= 0 (0 = off), got {self.top_k}", parameter="top_k")
        r = self.repeat_penalty
        if not isinstance(r, (int, float)) or math.isnan(r) or r <= 0 or math.isinf(r):
            raise UsageError(f"repeat_penalty must be > 0, got {r}", parameter="repeat_penalty")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UsageError(f"seed must be an integer >= 0, got {self.seed}", parameter="seed")
        n = self.particles
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PARTICLES):
            raise UsageError(f"particles must be an integer in [1, {MAX_PARTICLES}], got {n!r}", parameter="particles")
        e = self.ess
        if isinstance(e, bool) or not isinstance(e, (int, float)) or math.isnan(e) or not 0 < e <= 1:
            raise UsageError(f"ess must be in (0, 1], got {e!r}", parameter="ess")
        if self.repeat_last_n < 0:
            raise UsageError(f"repeat_last_n must be >= 0, got {self.repeat_last_n}", parameter="repeat_last_n")

    def to_dict(self) -> dict:
        """The trace header's `sampling` object."""
        d = asdict(self)
        d.pop("repeat_last_n")
        if self.particles is None:
            for k in ("particles", "ess", "end_weight"):
                d.pop(k)
        return d


# -- pure helpers -----------------------------------------------------------


def log_sum_exp(z: np.ndarray) -> float:
    """log(sum(exp(z))) in float64 (-inf for an empty or all -inf vector)."""
    z = np.asarray(z, dtype=np.float64)
    if z.size == 0:
        return -math.inf
    m = float(np.max(z))
    if not math.isfinite(m):
        return m
    return m + math.log(float(np.sum(np.exp(z - m))))


def legal_kl(logits: np.ndarray, legal: np.ndarray | None, *, full_lse: float | None = None) -> float:
    """KL(p_masked || p) = -log Z_t in nats (diagnostics.md), at temperature 1: log-sum-exp
    of every logit minus that of the legal ones (`legal`: a bool mask over the logits rows or
    their ids; None: unconstrained, 0). `full_lse`: log_sum_exp(logits) when already known."""
    if legal is None:
        return 0.0
    z = np.asarray(logits, dtype=np.float64)
    legal = np.asarray(legal)
    sub = z[legal[: z.shape[0]]] if legal.dtype == bool else z[legal]
    full = log_sum_exp(z) if full_lse is None else full_lse
    return max(full - log_sum_exp(sub), 0.0)


def legal_mass(logits: np.ndarray, legal: np.ndarray | None) -> float:
    """Z_t: the probability the model's own distribution (temperature 1) puts on the legal set."""
    return math.exp(-legal_kl(logits, legal))


def masked_logits(logits: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """float64 logits with -inf outside the legal set (mask None: everything legal)."""
    z = np.asarray(logits, dtype=np.float64)
    if mask is None:
        return z.copy()
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != z.shape:
        raise ValueError(f"mask has shape {mask.shape}, logits {z.shape}")
    return np.where(mask, z, -np.inf)


def softmax(z: np.ndarray) -> np.ndarray:
    """Probabilities (float64); -inf entries get exactly 0; an empty support gives all 0."""
    z = np.asarray(z, dtype=np.float64)
    m = np.max(z) if z.size else -np.inf
    if not np.isfinite(m):
        if m == np.inf:  # +inf logits: uniform over them
            out = (z == np.inf).astype(np.float64)
            return out / out.sum()
        return np.zeros_like(z)
    e = np.exp(z - m)
    return e / e.sum()


def _top_sorted(probs: np.ndarray, enough) -> np.ndarray:
    """Ids of positive-probability tokens, most probable first (ties: lowest id).

    Sorts only the tokens within a factor of the maximum when `enough(sorted_probs)`
    says they suffice: every token left out is less probable than every token kept,
    so the kept ones are exactly the head of the full order.
    """
    n = probs.shape[0]
    pmax = float(probs.max()) if n else 0.0
    if pmax > 0:
        for ratio in _CANDIDATE_RATIOS:
            cand = np.flatnonzero(probs >= pmax * ratio)
            if cand.size == n:
                break
            order = cand[np.lexsort((cand, -probs[cand]))]
            if enough(probs[order]):
                return order
    cand = np.flatnonzero(probs > 0)
    return cand[np.lexsort((cand, -probs[cand]))]


def _nucleus_size(sorted_probs: np.ndarray, top_p: float) -> int:
    cum = np.cumsum(sorted_probs)
    i = int(np.searchsorted(cum, top_p, side="left"))
    return min(i + 1, sorted_probs.shape[0])


def nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    """The top-p nucleus: ids of the smallest most-probable set with mass >= top_p.

    Ordered most probable first (ties: lowest id); at top_p = 1 it is the whole
    support, in id order. Zero-probability tokens never belong to it; it is never
    empty unless probs is all zero.
    """
    probs = np.asarray(probs, dtype=np.float64)
    if top_p >= 1.0:
        return np.flatnonzero(probs > 0)

    def enough(s: np.ndarray) -> bool:
        return bool(s.sum() >= top_p)

    order = _top_sorted(probs, enough)
    if order.size == 0:
        return order
    return order[: _nucleus_size(probs[order], top_p)]


def top_k_ids(probs: np.ndarray, k: int) -> np.ndarray:
    """The k most probable ids with positive probability, most probable first."""
    probs = np.asarray(probs, dtype=np.float64)
    order = _top_sorted(probs, lambda s: s.shape[0] >= k)
    return order[:k]


def apply_repeat_penalty(z: np.ndarray, history: Sequence[int], penalty: float) -> np.ndarray:
    """llama.cpp's repetition penalty, once per distinct id in `history` (in place)."""
    if penalty == 1.0 or not len(history):
        return z
    ids = np.unique(np.asarray(history, dtype=np.int64))
    ids = ids[(ids >= 0) & (ids < z.shape[0])]
    vals = z[ids]
    z[ids] = np.where(vals > 0, vals / penalty, vals * penalty)
    return z


def _positions(ids: np.ndarray, history: Sequence[int]) -> list[int]:
    """Positions in the ascending array `ids` of the history's ids that are in it."""
    if not len(history):
        return []
    h = np.asarray(history, dtype=np.int64)
    pos = np.searchsorted(ids, h)
    ok = pos < ids.shape[0]
    ok[ok] = ids[pos[ok]] == h[ok]
    return pos[ok].tolist()


# -- the sampler ------------------------------------------------------------


class Sampler:
    """Draws token ids from logits under a legal mask; deterministic for a seed."""

    def __init__(self, params: SamplingParams | None = None) -> None:
        self.params = params or SamplingParams()
        self.rng = np.random.default_rng(self.params.seed)

    def reseed(self, seed: int | None = None) -> None:
        """Restart the random stream (from params.seed unless given)."""
        self.rng = np.random.default_rng(self.params.seed if seed is None else seed)

    def skip(self) -> None:
        """Consume what one forced draw would (a fast-forwarded token), so the stream stays
        one number per token and does not depend on how a stretch was decoded."""
        if self.params.temperature > 0:
            self.rng.random()

    def distribution(
        self, logits: np.ndarray, legal_mask: np.ndarray | None, history: Sequence[int] = ()
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ids, probabilities) the draw picks from: after every step but the draw."""
        p = self.params
        z_all = np.asarray(logits)
        if legal_mask is None:
            ids = np.arange(z_all.shape[0])
        else:
            mask = np.asarray(legal_mask, dtype=bool)
            if mask.shape != z_all.shape:
                raise ValueError(f"mask has shape {mask.shape}, logits {z_all.shape}")
            ids = np.flatnonzero(mask)  # work on the legal tokens only (ascending ids)
            if ids.size == 0:
                raise NoLegalContinuation(step=-1)
        z = z_all[ids].astype(np.float64)
        z[np.isnan(z)] = -np.inf
        if not (z > -np.inf).any():
            z[:] = 0.0  # every legal token has logit -inf: uniform over the legal set, never NaN
        recent = list(history)[-p.repeat_last_n :] if p.repeat_last_n else []
        where = _positions(ids, recent)
        if p.temperature == 0:
            z = apply_repeat_penalty(z, where, p.repeat_penalty)
            best = int(np.argmax(z))  # first maximum: the lowest id
            return ids[best : best + 1], np.array([1.0])
        z = z / p.temperature
        z = apply_repeat_penalty(z, where, p.repeat_penalty)
        probs = softmax(z)
        if p.top_k and p.top_k < probs.shape[0]:
            keep = top_k_ids(probs, p.top_k)
            cut = np.zeros_like(probs)
            cut[keep] = probs[keep]
            probs = cut / cut.sum()
        pos = nucleus(probs, p.top_p)
        kept = probs[pos]
        return ids[pos], kept / kept.sum()

    def sample(self, logits: np.ndarray, legal_mask: np.ndarray | None = None, history: Sequence[int] = ()) -> int:
        """One token id. Raises NoLegalContinuation when the legal set is empty."""
        ids, probs = self.distribution(logits, legal_mask, history)
        if ids.shape[0] == 1:
            # still consume one number so the stream does not depend on the mask
            if self.params.temperature > 0:
                self.rng.random()
            return int(ids[0])
        u = self.rng.random()
        cum = np.cumsum(probs)
        i = int(np.searchsorted(cum, u * cum[-1], side="right"))
        return int(ids[min(i, ids.shape[0] - 1)])
