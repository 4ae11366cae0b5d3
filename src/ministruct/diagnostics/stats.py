"""Per-step diagnostics (diagnostics.md): one StepRecord per generated token, and a Summary.

Every number comes from the captured logits row the sampler used (the same-logit
counterfactual): the raw distribution and the masked one are evaluated on one vector.

Definitions, beyond diagnostics.md:
- `Z` = exp(lse(z[L]) - lse(z)) at temperature 1, in float64; `kl` = lse(z) - lse(z[L])
  (= -log Z, computed without the round trip through exp). Unconstrained steps
  (no mask): every logits row is legal, Z = 1, kl = 0.
- The nuclei use the sampling temperature T and top_p only (not top-k, not the
  repetition penalty): they are the collapse study's same-logit counterfactual.
  Probabilities are softmax(z / T) computed as the sampler does; the nucleus is the
  smallest most-probable prefix (ties: lowest id first) whose cumulative mass reaches
  top_p. At top_p = 1 nothing is truncated: the nucleus is every token with a finite
  logit (the whole legal set when masked). At T = 0 (greedy) and top_p < 1 the
  nucleus is {argmax} (ties: lowest id), size 1, for both distributions.
- `collapsed` = a free step (|L| >= 2) with top_p < 1 whose masked nucleus has one
  token; at top_p = 1 no step is collapsed, by definition.
- `tag` = `fast_forward` for a token the grammar dictated and the decoder evaluated in a
  batch without a draw (decode/loop.py, decode/fast_forward.py), whatever |L|; otherwise `forced`
  (|L| = 1) or `free`. A fast-forwarded step is never `collapsed` (nothing was sampled);
  every other number is computed as for any step.
- `top_changed` compares argmax ids (ties: lowest id), which do not depend on T.
- Precision: probabilities at T are computed as the sampler does (softmax of z[L] / T
  relative to its own maximum), so nucleus boundaries agree to the last bit. The
  T = 1 masked sum for kl may reuse the full row's exp terms unless they are near
  underflow. kl stays exact even when Z underflows to 0.0 (kl > ~745 nats).

Cost: a few full passes over the row (one exp at T = 1, one more at T != 1); only the
entries within a cut-off of the maximum are sorted (about 1-2 ms per step on Gemma's
262k rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from ministruct.decode.sampling import SamplingParams, legal_kl

if TYPE_CHECKING:
    from ministruct.decode.loop import Step
    from ministruct.engine.think import Boundaries
    from ministruct.engine.vocab import Vocabulary

FORCED = "forced"
FREE = "free"
FAST_FORWARD = "fast_forward"

# Candidate cut-offs (nats below the maximum, at temperature T) tried before a full sort.
_CUTS = (4.0, 8.0, 16.0, 32.0)


@dataclass(frozen=True)
class StepRecord:
    """The diagnostics of one generated token (field names are the trace contract)."""

    step: int
    token_id: int
    token: str
    legal_count: int
    Z: float
    kl: float
    tag: str
    nucleus_raw: int
    nucleus_masked: int
    collapsed: bool
    nucleus_changed: bool
    top_changed: bool
    mask_us: float
    token_bytes: bytes | None = field(default=None, compare=False)  # None: same as token.encode()
    control: bool = False  # an end-of-generation / control token (token is its name)
    phase: str | None = None  # "think" or "answer" with free text first (engine/think.py)
    eog_p: float | None = None  # in the thinking: the model's end-of-generation probability
    close_p: float | None = None  # in the thinking: the probability of tokens that write CLOSE on

    @property
    def forced(self) -> bool:
        return self.tag == FORCED

    @property
    def fast_forward(self) -> bool:
        return self.tag == FAST_FORWARD

    def to_record(self) -> dict:
        """The trace's step record body (without "v" and "type")."""
        rec = {
            "step": self.step,
            "token_id": self.token_id,
            "token": self.token,
            "legal_count": self.legal_count,
            "Z": self.Z,
            "kl": self.kl,
            "tag": self.tag,
            "nucleus_raw": self.nucleus_raw,
            "nucleus_masked": self.nucleus_masked,
            "collapsed": self.collapsed,
            "nucleus_changed": self.nucleus_changed,
            "top_changed": self.top_changed,
            "mask_us": round(self.mask_us, 1),
        }
        if self.token_bytes is not None and not _is_utf8(self.token_bytes):
            rec["hex"] = self.token_bytes.hex(" ")
        if self.control:
            rec["control"] = True
        if self.phase is not None:
            rec["phase"] = self.phase
        if self.eog_p is not None:
            rec.update(eog_p=self.eog_p, close_p=self.close_p)
        return rec


@dataclass(frozen=True)
class _Exp:
    """exp(w - offset) for one distribution's logits w = z / T, and its sum."""

    e: np.ndarray
    s: float
    offset: float  # the subtracted maximum (so log-sum-exp = offset + log s)

    @property
    def lse(self) -> float:
        return self.offset + math.log(self.s)


def _exp(w: np.ndarray) -> _Exp:
    m = float(np.max(w))
    e = np.subtract(w, m)
    np.exp(e, out=e)
    return _Exp(e, float(np.sum(e)), m)


# -- core computations ------------------------------------------------------------


def _nuclei_of(ex: _Exp, top_ps: Sequence[float], ids: np.ndarray | None = None) -> list[np.ndarray]:
    """The nucleus (ids ascending) for each top_p < 1, from one sort.

    Only the entries above a cut-off are sorted: the first cut whose mass reaches the
    largest top_p holds every nucleus (every entry left out is less probable than
    every entry kept, and a smaller top_p's nucleus is a prefix of the same order).
    Ties at the boundary go to the lowest ids, as in the sampler.
    """
    e = ex.e
    name = (lambda a: a) if ids is None else (lambda a: ids[a])
    most = max(top_ps)
    top = float(np.max(e)) if e.size else 0.0
    for cut in _CUTS:
        cand = np.flatnonzero(e > top * math.exp(-cut))
        if float(np.sum(e[cand])) / ex.s >= most:
            found = _prefixes(e[cand] / ex.s, top_ps)
            if found[list(top_ps).index(most)] is not None:
                return [name(cand[f]) for f in found]
    cand = np.flatnonzero(e > 0)
    found = _prefixes(e[cand] / ex.s, top_ps)
    return [name(cand[f if f is not None else slice(None)]) for f in found]


def _prefixes(p: np.ndarray, top_ps: Sequence[float]) -> list[np.ndarray | None]:
    """For each top_p, the positions in p of its smallest most-probable prefix with mass
    >= top_p (None: not reached)."""
    vals = np.sort(p)[::-1]
    cum = np.cumsum(vals)
    out: list[np.ndarray | None] = []
    for top_p in top_ps:
        i = int(np.searchsorted(cum, top_p, side="left"))
        if i >= len(vals):
            out.append(None)
            continue
        k, v = i + 1, vals[i]
        keep = p > v
        need = k - int(np.count_nonzero(keep))
        if need:  # ties at the boundary: the lowest positions (ids ascend with positions)
            keep[np.flatnonzero(p == v)[:need]] = True
        out.append(np.flatnonzero(keep))
    return out


def _nuclei(ex: _Exp, w: np.ndarray, top_ps: Sequence[float], greedy: bool, ids: np.ndarray | None) -> list[np.ndarray]:
    """The sampler's nucleus at each top_p (greedy: the argmax; top_p 1: every finite logit)."""
    name = (lambda a: a) if ids is None else (lambda a: ids[a])
    out: dict[float, np.ndarray] = {}
    cut = [p for p in top_ps if p < 1.0]
    if cut and not greedy:
        out.update(zip(cut, _nuclei_of(ex, cut, ids)))
    for p in top_ps:
        if p >= 1.0:
            out[p] = name(np.flatnonzero(np.isfinite(w)))
        elif greedy:
            out[p] = name(np.asarray([int(np.argmax(w))]))
    return [out[p] for p in top_ps]


class StepStats:
    """Turns Steps into StepRecords for one set of sampling parameters.

    Caches the legal ids of recently seen masks (the engine hands out the same
    read-only array for a configuration it has seen before).
    """

    def __init__(
        self, params: SamplingParams, vocab: "Vocabulary | None" = None, boundaries: "Boundaries | None" = None
    ) -> None:
        self.params = params
        self.vocab = vocab
        self.boundaries = boundaries  # a free-text-first grammar's: thinking steps get eog_p and close_p
        self._legal_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def legal_ids(self, mask: np.ndarray) -> np.ndarray:
        """np.flatnonzero(mask), memoized by array identity for read-only masks."""
        if mask.flags.writeable:
            return np.flatnonzero(mask)
        hit = self._legal_cache.get(id(mask))
        if hit is not None and hit[0] is mask:
            return hit[1]
        ids = np.flatnonzero(mask)
        if len(self._legal_cache) >= 256:
            self._legal_cache.clear()
        self._legal_cache[id(mask)] = (mask, ids)
        return ids

    def compute(
        self,
        logits: np.ndarray,
        mask: np.ndarray | None,
        *,
        step: int = 0,
        token_id: int = -1,
        token: str = "",
        mask_us: float = 0.0,
        fast_forward: bool = False,
    ) -> StepRecord:
        """The record of one step from its captured logits and legal mask."""
        return self.compute_top_ps(
            logits,
            mask,
            (self.params.top_p,),
            step=step,
            token_id=token_id,
            token=token,
            mask_us=mask_us,
            fast_forward=fast_forward,
        )[0]

    def compute_top_ps(
        self,
        logits: np.ndarray,
        mask: np.ndarray | None,
        top_ps: Sequence[float],
        *,
        step: int = 0,
        token_id: int = -1,
        token: str = "",
        mask_us: float = 0.0,
        fast_forward: bool = False,
    ) -> list[StepRecord]:
        """The records of one step at this temperature and each of `top_ps` (each one as
        `compute` gives it with that top_p): the softmaxes are computed once for all."""
        t = self.params.temperature
        z = np.asarray(logits, dtype=np.float64)
        if np.isnan(z).any():
            z = np.where(np.isnan(z), -np.inf, z)
        n = int(z.shape[0])
        any_sampled = t > 0 and any(p < 1.0 for p in top_ps)  # a nucleus needs probabilities at T
        raw1 = _exp(z)
        w = z if t in (0, 1) else z / t
        raw_t = raw1 if (t == 1 or not any_sampled) else _exp(w)
        raw_top = int(np.argmax(z))
        legal = None
        if mask is not None and n:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != z.shape:
                raise ValueError(f"mask has shape {mask.shape}, logits {z.shape}")
            legal = self.legal_ids(mask)
            if legal.shape[0] == 0:
                raise ValueError(f"step {step}: the legal set is empty")
            if legal.shape[0] == n:
                legal = None
        legal_count = n if legal is None else int(legal.shape[0])
        if legal is not None:
            zl = z[legal]
            wl = zl if t in (0, 1) else w[legal]
            # the masked softmax at T exactly as the sampler computes it (relative to
            # the legal maximum), so nucleus boundaries agree to the last bit
            ml = _exp(wl) if any_sampled else raw1
            masked_top = int(legal[int(np.argmax(zl))])
            kl_legal = legal_kl(z, legal, full_lse=raw1.lse)
        tag = FAST_FORWARD if fast_forward else FORCED if legal_count == 1 else FREE
        raw_nuclei = _nuclei(raw_t, w, top_ps, t == 0, None)
        masked_nuclei = raw_nuclei if legal is None else _nuclei(ml, wl, top_ps, t == 0, legal)
        out = []
        kl, top = (0.0, raw_top) if legal is None else (kl_legal, masked_top)
        for top_p, raw_nucleus, masked_nucleus in zip(top_ps, raw_nuclei, masked_nuclei):
            n_raw, n_masked = int(raw_nucleus.shape[0]), int(masked_nucleus.shape[0])
            changed = n_raw != n_masked or not np.array_equal(raw_nucleus, masked_nucleus)
            out.append(
                StepRecord(
                    step=step,
                    token_id=int(token_id),
                    token=token,
                    legal_count=legal_count,
                    Z=math.exp(-kl),
                    kl=kl,
                    tag=tag,
                    nucleus_raw=n_raw,
                    nucleus_masked=n_masked,
                    collapsed=tag == FREE and top_p < 1.0 and n_masked == 1,
                    nucleus_changed=bool(changed),
                    top_changed=raw_top != top,
                    mask_us=float(mask_us),
                )
            )
        return out

    def record(self, step: "Step") -> StepRecord:
        """The record of a Step yielded by the decoder."""
        text, data, control = token_text(step.token_id, step.token, self.vocab)
        rec = self.compute(
            step.logits,
            step.mask,
            step=step.index,
            token_id=step.token_id,
            token=text,
            mask_us=step.mask_us,
            fast_forward=getattr(step, "fast_forward", False),
        )
        phase = getattr(step, "phase_state", None)
        if phase is None:
            return replace(rec, token_bytes=data, control=control)
        eog_p = close_p = None
        if phase.phase == "think" and self.boundaries is not None:
            eog_p, close_p = thinking_probabilities(step.logits, self.boundaries, phase.matched)
        return replace(rec, token_bytes=data, control=control, phase=phase.phase, eog_p=eog_p, close_p=close_p)


def thinking_probabilities(logits: np.ndarray, boundaries: "Boundaries", matched: int) -> tuple[float, float]:
    """(end-of-generation probability, probability of the tokens that write CLOSE on after
    `matched` of its bytes) under the model's own distribution."""
    z = np.asarray(logits, dtype=np.float64)
    z = np.where(np.isnan(z), -np.inf, z)
    p = np.exp(z - z.max())
    p /= p.sum()
    vocab = boundaries.compiled.vocab
    eog = np.fromiter(sorted(vocab.eog_ids), dtype=np.int64)
    toward = boundaries.toward(matched).copy()
    toward[eog] = False
    return float(p[eog].sum()) if len(eog) else 0.0, float(p[toward[: len(p)]].sum())


def token_text(token_id: int, data: bytes, vocab: "Vocabulary | None") -> tuple[str, bytes | None, bool]:
    """(display text, bytes or None, is-control) of a generated token.

    Control tokens (end of generation) add no bytes: they are shown by their name.
    Bytes that are not valid UTF-8 alone are decoded with U+FFFD and kept as bytes.
    """
    if not data and vocab is not None and token_id in vocab.control_ids:
        return vocab.piece(token_id), None, True
    return data.decode("utf-8", "replace"), (None if _is_utf8(data) else data), False


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- summary ----------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Aggregates of one generation's step records (None where undefined)."""

    steps: int
    forced: int  # drawn with one legal token
    free: int  # drawn from two or more
    collapsed: int
    collapse_rate: float | None  # collapsed / free steps
    nucleus_changed: int
    top_changed: int
    mean_Z: float | None
    min_Z: float | None
    min_Z_step: int | None
    total_kl: float
    mask_us_mean: float | None
    fast_forward: int = 0  # dictated by the grammar and evaluated in a batch, not drawn
    think: int = 0  # steps in the thinking (the numbers above are the answer's alone)

    @property
    def sampled(self) -> int:
        """Steps the sampler drew (forced ones included)."""
        return self.forced + self.free

    def to_record(self) -> dict:
        return {
            "steps": self.steps,
            "sampled": self.sampled,
            "forced": self.forced,
            "free": self.free,
            "fast_forward": self.fast_forward,
            "collapsed": self.collapsed,
            "collapse_rate": self.collapse_rate,
            "nucleus_changed": self.nucleus_changed,
            "top_changed": self.top_changed,
            "mean_Z": self.mean_Z,
            "min_Z": self.min_Z,
            "min_Z_step": self.min_Z_step,
            "total_kl": self.total_kl,
            "mask_us_mean": None if self.mask_us_mean is None else round(self.mask_us_mean, 1),
            **({"think_steps": self.think} if self.think else {}),
        }


def summarize(records: Sequence[StepRecord] | Iterable[StepRecord]) -> Summary:
    """Forced/free/fast-forwarded counts, mean and lowest Z, collapse rate over free steps,
    total KL (every step counts towards Z and KL, fast-forwarded ones included). With free
    text first, all of these are the answer's: thinking steps are only counted (`think`)."""
    recs = list(records)
    n_think = sum(r.phase == "think" for r in recs)
    recs = [r for r in recs if r.phase != "think"]
    free = [r for r in recs if r.tag == FREE]
    n_ff = sum(r.tag == FAST_FORWARD for r in recs)
    collapsed = sum(r.collapsed for r in free)
    low = min(recs, key=lambda r: (r.Z, r.step)) if recs else None
    return Summary(
        steps=len(recs) + n_think,
        forced=len(recs) - len(free) - n_ff,
        free=len(free),
        collapsed=collapsed,
        collapse_rate=collapsed / len(free) if free else None,
        nucleus_changed=sum(r.nucleus_changed for r in recs),
        top_changed=sum(r.top_changed for r in recs),
        mean_Z=math.fsum(r.Z for r in recs) / len(recs) if recs else None,
        min_Z=low.Z if low else None,
        min_Z_step=low.step if low else None,
        total_kl=math.fsum(r.kl for r in recs),
        mask_us_mean=math.fsum(r.mask_us for r in recs) / len(recs) if recs else None,
        fast_forward=n_ff,
        think=n_think,
    )
