"""The order of operations, on one captured logits row (the issue's counterfactual).

Mask first (ministruct's sampler): mask -> temperature -> top-p, so the nucleus is
taken over the legal tokens. Truncation first (what sample-then-check amounts to):
temperature -> top-p over every token -> mask, so the nucleus may hold no legal token
at all (`empty`); otherwise the draw is from the legal part of the raw nucleus,
renormalized. Both use the sampler's own softmax and nucleus (decode/sampling.py);
temperature 0 is greedy in both (truncation-first is empty when the overall argmax is
illegal). Top-k and the repetition penalty are left out, as in the per-step
statistics (diagnostics.md).

`tv` is the total variation distance between the two sampling distributions,
1/2 * sum |p_mask_first - p_trunc_first|, None when truncation-first is empty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ministruct.decode.sampling import nucleus, softmax


@dataclass(frozen=True)
class OrderOutcome:
    """One step's comparison at one (temperature, top_p)."""

    empty: bool  # truncation first leaves no legal token in the nucleus
    tv: float | None  # total variation distance (None when empty)


def _clean(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    return np.where(np.isnan(z), -np.inf, z)


def mask_first(logits: np.ndarray, mask: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """The sampling distribution over all rows: mask -> temperature -> top-p."""
    z = _clean(logits)
    legal = np.flatnonzero(mask)
    out = np.zeros(z.shape[0])
    if legal.size == 0:
        raise ValueError("the legal set is empty")
    zl = z[legal]
    if temperature == 0:
        out[legal[int(np.argmax(zl))]] = 1.0
        return out
    p = softmax(zl / temperature)
    keep = nucleus(p, top_p)
    out[legal[keep]] = p[keep] / p[keep].sum()
    return out


def truncation_first(logits: np.ndarray, mask: np.ndarray, temperature: float, top_p: float) -> np.ndarray | None:
    """The sampling distribution over all rows: temperature -> top-p -> mask (None: no legal token left)."""
    z = _clean(logits)
    mask = np.asarray(mask, dtype=bool)
    out = np.zeros(z.shape[0])
    if temperature == 0:
        best = int(np.argmax(z))
        if not mask[best]:
            return None
        out[best] = 1.0
        return out
    p = softmax(z / temperature)
    keep = nucleus(p, top_p)
    keep = keep[mask[keep]]
    if keep.size == 0:
        return None
    out[keep] = p[keep] / p[keep].sum()
    return out


def compare_orders(logits: np.ndarray, mask: np.ndarray, temperature: float, top_p: float) -> OrderOutcome:
    """Mask first against truncation first on the same logits."""
    a = mask_first(logits, mask, temperature, top_p)
    b = truncation_first(logits, mask, temperature, top_p)
    if b is None:
        return OrderOutcome(True, None)
    return OrderOutcome(False, min(1.0, 0.5 * float(np.abs(a - b).sum())))
