"""Particles on the local model: smc.py's sampler over llama.cpp sequences, as a Decoder.

`ParticleDecoder` is a Decoder whose `steps()` first runs the whole sampler (the output is
known only when every particle has ended), then yields the returned output's Steps;
`.result` is its Generation, with `particles` (smc.ParticleStats). Which sampler runs:

  - with two particles or more, a language small enough to enumerate (exact.enumerate_language:
    a choice, an enum, a bounded regex) is scored member by member on the model's own context, each prefix
    evaluated once and its KV cache kept for its continuations, and the output drawn from
    the exact conditional (`particle_method` "exact");
  - otherwise N particles advance as N sequences of one llama.cpp context, one batched
    evaluation per step, and a resampled particle's KV cache is copied, not recomputed
    (`particle_method` "smc").
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from ministruct.decode.batched import CTX_PAD
from ministruct.decode.exact import enumerate_language, exact_draw, small_language
from ministruct.decode.loop import Decoder, Generation, Step
from ministruct.decode.smc import Particles, ParticleStats

KEEP_ROWS_UP_TO = 16  # particles whose Steps keep their logits rows (the fight warnings read them) unless asked

if TYPE_CHECKING:
    from ministruct.decode.model import Model
    from ministruct.decode.sequences import Sequences


class SequenceParticles:
    """smc.ParticleModel on llama.cpp: particle i is sequence i of one context."""

    def __init__(self, model: "Model", n: int, n_ctx: int) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.seqs: "Sequences" = model.sequences(n, n_ctx)
        self._stored: tuple[list[int], np.ndarray] | None = None  # the prompt kept in seqs.store, its row

    @property
    def vocabulary(self) -> Any:
        return self.model.vocabulary

    def tokenize_bytes(self, data: bytes) -> list[int]:
        return self.model.tokenize_bytes(data)

    def fits(self, n: int, n_ctx: int) -> bool:
        return self.seqs.n_seq >= n and self.n_ctx >= n_ctx

    def begin(self, prompt: Sequence[int], n: int) -> np.ndarray:
        """The prompt in every particle's sequence: evaluated once, or copied from the
        store when it is the last run's (samples of one prompt)."""
        seqs, prompt = self.seqs, [int(t) for t in prompt]
        if self._stored is not None and self._stored[0] == prompt:
            for i in range(n):
                seqs.copy(seqs.store, i)
            return self._stored[1].copy()
        seqs.clear_all()
        row = seqs.decode([(0, prompt, 1)])[0][-1]
        for i in range(1, n):
            seqs.copy(0, i)
        seqs.copy(0, seqs.store)
        self._stored = (prompt, row.copy())
        return row

    def extend(self, work: Sequence[tuple[int, int]]) -> list[np.ndarray]:
        rows = self.seqs.decode([(i, [t], 1) for i, t in work])
        return [r[-1] for r in rows]

    def copy(self, src: int, dst: int) -> None:
        self.seqs.copy(src, dst)

    def close(self) -> None:
        self.seqs.close()


class PrefixRows:
    """The logits row after the prompt and an output prefix, in sequence 0 of the
    particles' context (the prompt kept in its store for the particles that may follow):
    the part of a prefix shared with the one before is not evaluated again."""

    def __init__(self, ctx: SequenceParticles, prompt: Sequence[int]) -> None:
        self.ctx = ctx
        self.prompt = [int(t) for t in prompt]
        self.root = ctx.begin(self.prompt, 1)
        self.current: tuple[int, ...] = ()

    def __call__(self, seq: tuple[int, ...]) -> np.ndarray:
        if not seq:
            return self.root
        common = 0
        for a, b in zip(self.current, seq):
            if a != b:
                break
            common += 1
        common = min(common, len(seq) - 1)  # the last token is evaluated for its row
        seqs = self.ctx.seqs
        if not seqs.truncate(0, len(self.prompt) + common):
            seqs.copy(seqs.store, 0)
            common = 0
        # one token a decode, so that every row (and the KV cache under it) is computed in
        # the same batch shape whatever order the prefixes are visited in; logits for the last only
        *between, last = seq[common:]
        for t in between:
            seqs.decode([(0, [t], 0)])
        row = seqs.decode([(0, [last], 1)])[0][-1]
        self.current = seq
        return row


class ParticleContexts:
    """One SequenceParticles per model, made again only when a run needs more room."""

    def __init__(self) -> None:
        self._held: SequenceParticles | None = None

    def get(self, model: "Model", n: int, need: int) -> SequenceParticles:
        n_ctx = min(model.n_ctx, -(-max(1, need) // CTX_PAD) * CTX_PAD)
        held = self._held
        if held is not None and held.model is model and held.fits(n, n_ctx):
            return held
        if held is not None:
            held.close()
        self._held = SequenceParticles(model, n, n_ctx)
        return self._held

    def close(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None


class ParticleDecoder(Decoder):
    """A Decoder that samples with `params.particles` particles (see the module docstring).
    `contexts` keeps the particles' llama.cpp context between generations; `exact_cache`
    keeps a small language's enumeration between samples of one prompt."""

    def __init__(
        self,
        *args: Any,
        contexts: ParticleContexts | None = None,
        exact_cache: dict | None = None,
        exact: bool = True,
        trace_weights: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if self.params.particles is None:
            raise ValueError("ParticleDecoder needs SamplingParams(particles=N)")
        self.contexts = contexts if contexts is not None else ParticleContexts()
        self.exact_cache = exact_cache if exact_cache is not None else {}
        self.exact = exact  # enumerate a small language (with two particles or more)
        self.trace_weights = trace_weights
        self.particle_weights: list[list[float]] | None = None  # with trace_weights: per step, every particle's

    def steps(self) -> Iterator[Step]:
        self.start()  # the matcher reset, the budget rule checked (BudgetTooSmall), once
        exact = self.exact and self.matcher is not None and (self.params.particles or 1) > 1
        got = self._exact() if exact else None  # one particle: today's draws, weighed
        gen, steps = got if got is not None else self._smc()
        yield from steps
        self._result = gen

    def _exact(self) -> tuple[Generation, list[Step]] | None:
        """The output drawn from the exact conditional, when the language is small."""
        from dataclasses import replace

        p = self.params
        grammar = getattr(self.matcher, "compiled", None)
        key = (id(grammar), tuple(self.prompt_tokens), replace(p, seed=0), self.max_tokens, self.budget_aware)
        if key not in self.exact_cache:
            ctx = self.contexts.get(self.model, p.particles or 1, len(self.prompt_tokens) + self.max_tokens + 1)
            eog = sorted(self.model.vocabulary.eog_ids)
            small = small_language(self.matcher.fork(), eog, max_tokens=self.max_tokens, budget_aware=self.budget_aware)  # type: ignore[union-attr]
            enum = (
                enumerate_language(
                    PrefixRows(ctx, self.prompt_tokens),
                    self.prompt_tokens,
                    self.matcher.fork(),  # type: ignore[union-attr]
                    p,
                    eog,
                    max_tokens=self.max_tokens,
                    budget_aware=self.budget_aware,
                    end_weight=p.end_weight,
                )
                if small
                else None
            )
            self.exact_cache.clear()  # one prompt's at a time: rows are large
            self.exact_cache[key] = (grammar, enum)  # the grammar held, so that its id is not reused
        enum = self.exact_cache[key][1]
        if enum is None or not enum.p_valid > 0:  # not small, or the base never writes it: particles say so
            return None
        rng = np.random.default_rng(p.seed)
        vocab = self.model.vocabulary
        seq, steps, stop, _ = exact_draw(enum, rng, vocab, self.max_tokens, self.matcher)
        p_valid = enum.p_valid
        stats = ParticleStats(
            "exact",
            p.particles or 1,
            p_valid,
            math.log(p_valid) if p_valid > 0 else -math.inf,
            None,
            0,
            left_out=enum.left_out,
        )
        gen = Generation(
            tokens=list(seq),
            output=b"".join(vocab.token_bytes(t) for t in seq),
            stop_reason=stop,
            complete=bool(self.matcher.is_accepting()),  # type: ignore[union-attr]
            prompt_tokens=list(self.prompt_tokens),
            n_steps=len(steps),
            budget_limited=any(s.budget_limited for s in steps),
            phase_state=getattr(self.matcher, "phase_state", None),
            particles=stats,
        )
        return gen, steps

    def _smc(self) -> tuple[Generation, list[Step]]:
        p = self.params
        n = p.particles or 1
        ctx = self.contexts.get(self.model, n, len(self.prompt_tokens) + self.max_tokens + 1)
        res = Particles(
            ctx,
            self.prompt_tokens,
            self.matcher,
            p,
            n=n,
            ess=p.ess,
            end_weight=p.end_weight,
            max_tokens=self.max_tokens,
            budget_aware=self.budget_aware,
            fast_forward=self.fast_forward,
            keep_rows=self.forced_logits or n <= KEEP_ROWS_UP_TO,
            trace_weights=self.trace_weights,
        ).run()
        gen = res.generation
        if self.trace_weights:
            self.particle_weights = res.weights
        gen.particles = ParticleStats("smc", n, res.p_valid, res.log_weight, res.ess_min, res.resamples, res.weights)
        return gen, res.steps
