"""Seeded walks through a compiled grammar (timed, for benchmarks; sampling, for
`inspect`), and benchmark building blocks: timed compile, memory, decode rate.

    compiled, compile_ms = timed_compile(grammar, vocab, use_cache=False)
    walk = random_walk(compiled, steps=200, seed=0)
    walk.stats().to_dict()       # {"mean", "p50", "p99", "max"} in microseconds
    warm_walk(grammar, vocab, 200, after_seed=0)   # the warm figure: another output, never a replay

A walk chooses a uniformly random legal token at every step (seeded) and restarts
from the beginning of the grammar when it chooses end-of-generation. Every mask()
call is timed, first visits of a parser configuration included: with a cold
compile (use_cache=False) the timings show what a first generation pays.

`decode_rate` and `output_rate` time any decoder that yields steps (decode.loop.Decoder);
this module imports nothing below the engine layer.
"""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

import numpy as np

from ministruct.engine import kernel
from ministruct.engine.compile import DEAD, CompiledGrammar, compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.slices import index_for
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import Grammar

RESET = -1  # marks, in a walk's token list, a restart after end-of-generation (or a dead end)


@dataclass(frozen=True)
class TimeStats:
    """Summary of per-step times, in microseconds."""

    mean: float
    p50: float
    p99: float
    max: float
    n: int

    @classmethod
    def of(cls, samples_us: Iterable[float]) -> "TimeStats":
        a = np.asarray(list(samples_us), dtype=np.float64)
        if not a.size:
            return cls(0.0, 0.0, 0.0, 0.0, 0)
        return cls(
            float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)), float(a.max()), int(a.size)
        )

    def to_dict(self, digits: int = 2) -> dict[str, float]:
        """The `mask_us` object of `bench --json`."""
        return {k: round(getattr(self, k), digits) for k in ("mean", "p50", "p99", "max")}


class Companion(Protocol):
    """Another engine walked in lockstep (benchmarks/masks.py drives llguidance this way)."""

    def legal(self) -> np.ndarray | None: ...  # bool over token ids, or None when unknown
    def advance(self, token_id: int) -> None: ...
    def reset(self) -> None: ...


@dataclass
class Walk:
    """What a random walk did: tokens (RESET marks restarts), mask times, legal-set sizes."""

    tokens: list[int] = field(default_factory=list)
    mask_us: list[float] = field(default_factory=list)
    legal_counts: list[int] = field(default_factory=list)
    resets: int = 0

    @property
    def steps(self) -> int:
        return len(self.mask_us)

    @property
    def first_mask_us(self) -> float:
        return self.mask_us[0] if self.mask_us else 0.0

    def stats(self) -> TimeStats:
        return TimeStats.of(self.mask_us)


@dataclass(frozen=True)
class Setup:
    """Seconds spent building (or loading) a vocabulary's token trie, and loading the compiled walk."""

    vocab_s: float
    kernel_s: float

    @property
    def total_s(self) -> float:
        return self.vocab_s + self.kernel_s


def prepare_vocabulary(vocab: Vocabulary) -> Setup:
    """Build (or load) the vocabulary's token trie, and load the compiled walk. Done once
    per vocabulary (the walk once per process), like llguidance's tokenizer
    construction, so it is kept out of compile times."""
    t0 = time.perf_counter()
    index_for(vocab)
    t1 = time.perf_counter()
    kernel.available()
    return Setup(t1 - t0, time.perf_counter() - t1)


def timed_compile(grammar: Grammar, vocab: Vocabulary, *, use_cache: bool = False) -> tuple[CompiledGrammar, float]:
    """compile_grammar plus its wall time in milliseconds."""
    t0 = time.perf_counter()
    compiled = compile_grammar(grammar, vocab, use_cache=use_cache)
    return compiled, (time.perf_counter() - t0) * 1000


def random_walk(
    compiled: CompiledGrammar,
    steps: int,
    *,
    seed: int = 0,
    companion: Companion | None = None,
    on_step: Callable[[int, np.ndarray], None] | None = None,
) -> Walk:
    """Walk `steps` steps choosing uniformly random legal tokens; time every mask().

    With a companion, the token is drawn from the tokens both engines allow (when that
    set is empty, from ours alone); the companion is advanced and reset in lockstep.
    `on_step(i, mask)` sees every mask (for exactness checks).
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    rng = np.random.default_rng(seed)
    matcher = Matcher(compiled)
    eog = compiled.vocab.eog_ids
    walk = Walk()
    clock = time.perf_counter
    for i in range(steps):
        t0 = clock()
        mask = matcher.mask()
        walk.mask_us.append((clock() - t0) * 1e6)
        if on_step is not None:
            on_step(i, mask)
        legal = np.flatnonzero(mask)
        walk.legal_counts.append(int(legal.size))
        candidates = legal
        if companion is not None:
            other = companion.legal()
            if other is not None:
                n = min(len(other), len(mask))
                both = np.flatnonzero(mask[:n] & other[:n])
                if both.size:
                    candidates = both
        if not candidates.size:  # cannot happen for a trimmed grammar; restart anyway
            token = RESET
        else:
            token = _draw(rng, candidates)
        if token == RESET or token in eog:
            walk.tokens.append(token)
            walk.resets += 1
            matcher.reset()
            if companion is not None:
                companion.reset()
            continue
        matcher.advance(token)
        if companion is not None:
            companion.advance(token)
        walk.tokens.append(token)
    return walk


def warm_walk(grammar: Grammar, vocab: Vocabulary, steps: int, *, after_seed: int, use_cache: bool = False) -> Walk:
    """The warm figure: a walk of `steps` steps at the next seed (`after_seed + 1`), so an
    output the process has not walked, on a fresh compile of `grammar` in a process whose
    code and vocabulary data are already warm. Never a replay of the walk at `after_seed`:
    a replay meets only configurations that walk made, which says nothing of a new output."""
    return random_walk(compile_grammar(grammar, vocab, use_cache=use_cache), steps, seed=after_seed + 1)


def _draw(rng: np.random.Generator, ids: np.ndarray) -> int:
    """One id drawn uniformly (the one rule of every seeded walk here)."""
    return int(ids[rng.integers(ids.size)])


@dataclass
class SampleWalk:
    """One sample walk: its output, token count, and whether the grammar accepts it."""

    text: str
    n_tokens: int
    complete: bool

    def to_dict(self) -> dict:
        return {"text": self.text, "n_tokens": self.n_tokens, "complete": self.complete}


def sample_walks(
    compiled: CompiledGrammar,
    *,
    n: int = 5,
    max_steps: int = 32,
    seed: int = 0,
    stop_p: float = 0.25,
    on_walk: Callable[[SampleWalk], None] | None = None,
) -> tuple[list[SampleWalk], list[int]]:
    """`n` seeded walks through the grammar on its vocabulary, for sample strings and
    legal-set sizes: each step draws a legal token uniformly (end-of-generation excluded);
    once the output is complete a walk stops with probability `stop_p` (or when no text
    token is legal). Returns the walks and the legal-set sizes of the configurations seen."""
    vocab = compiled.vocab
    rng = np.random.default_rng(seed)
    eog = np.asarray(sorted(vocab.eog_ids), dtype=np.int64)
    sizes: dict[int, int] = {}
    walks: list[SampleWalk] = []
    for _ in range(n):
        cid, out, count = compiled.initial, bytearray(), 0
        for _ in range(max_steps):
            legal = np.flatnonzero(compiled.mask(cid))
            sizes.setdefault(cid, int(legal.shape[0]))
            text_ids = np.setdiff1d(legal, eog, assume_unique=True) if eog.size else legal
            if compiled.is_accepting(cid) and (text_ids.size == 0 or rng.random() < stop_p):
                break
            if text_ids.size == 0:
                break
            tok = _draw(rng, text_ids)
            nxt = compiled.step_token(cid, tok)
            if nxt == DEAD:  # cannot happen for a legal token; never loop on it
                break
            cid = nxt
            out += vocab.token_bytes(tok)
            count += 1
        walk = SampleWalk(bytes(out).decode("utf-8", "replace"), count, bool(compiled.is_accepting(cid)))
        walks.append(walk)
        if on_walk is not None:
            on_walk(walk)
    return walks, list(sizes.values())


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MiB."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


class _Steps(Protocol):
    def steps(self) -> Iterable: ...


def decode_rate(decoder: _Steps) -> tuple[float, int]:
    """(tokens per second, tokens) of one generation, timed from its first token to its
    last so that the prompt's prefill is left out. 0.0 when fewer than 2 tokens came."""
    stamps: list[float] = []
    for _ in decoder.steps():
        stamps.append(time.perf_counter())
    if len(stamps) < 2:
        return 0.0, len(stamps)
    return (len(stamps) - 1) / (stamps[-1] - stamps[0]), len(stamps)


def first_token_ms(decoder: _Steps) -> float:
    """Milliseconds from the start of a generation to its first step (prefill, first
    mask, first draw); the rest of the generation runs out untimed."""
    t0 = time.perf_counter()
    first = None
    for _ in decoder.steps():
        if first is None:
            first = time.perf_counter()
    return ((first if first is not None else time.perf_counter()) - t0) * 1000


def output_rate(decoder: _Steps) -> tuple[float, int]:
    """(steps per second, steps) of one generation, from the start of its loop to its last
    step. Unlike `decode_rate` the first step's work counts too, so a batch that yields
    several steps at once (fast-forward) is charged in full; run the same prompt once
    before, so that its prefill is a cache hit (Model.prefill) and not in the time."""
    t0 = time.perf_counter()
    last, n = t0, 0
    for _ in decoder.steps():
        n += 1
        last = time.perf_counter()
    return (n / (last - t0) if n and last > t0 else 0.0), n


__all__ = [
    "RESET",
    "TimeStats",
    "Walk",
    "Companion",
    "Setup",
    "prepare_vocabulary",
    "timed_compile",
    "random_walk",
    "warm_walk",
    "peak_rss_mb",
    "decode_rate",
    "output_rate",
    "first_token_ms",
]
