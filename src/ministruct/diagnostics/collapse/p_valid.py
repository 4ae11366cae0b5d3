"""P(valid), schema shown vs withheld: the study's sequence-level number (issue 47).

Mean Z says, step by step, how much of the model's mass the grammar keeps. P(valid) says
it once for the whole output: the probability that the model, sampling its own
distribution (temperature 1, no truncation: the distribution Z is defined on) without the
constraint, writes an output the schema accepts within `max_tokens`, its end of generation
included. It is `gen --particles N`'s `p_valid` (docs/sampling.md) at that setting: a small
language (an enum) is enumerated exactly, any other is estimated without bias by N
particles.

A study runs it once per schema, prompt and condition (shown, withheld) with the study's
first seed, after the grid's generations; each run is one line of data.jsonl, so a resumed
study does not run it again. The report gives, per schema, each condition's mean over its
prompts and the ratio shown / withheld: how much of the format the prompt already carried.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from ministruct.decode.sampling import SamplingParams

CONDITION_PREFIX = "p_valid:"  # a study Unit's condition for a P(valid) run: "p_valid:shown"
DEFAULT_PARTICLES = 16


def p_valid_params(base: SamplingParams, particles: int, seed: int) -> SamplingParams:
    """The sampler a P(valid) run conditions: the model's own distribution (temperature 1,
    no top-k or top-p), the study's repetition penalty, with `particles` particles."""
    return SamplingParams(
        temperature=1.0, top_p=1.0, top_k=0, repeat_penalty=base.repeat_penalty, seed=seed, particles=particles
    )


@dataclass
class PValidRun:
    """One P(valid) run: a schema, prompt and condition, and what the particles said."""

    schema: str
    prompt: str
    prompt_index: int
    condition: str  # "shown" or "withheld"
    seed: int
    particles: int
    method: str  # "exact" (the language enumerated) or "smc"
    p_valid: float
    ess_min: float | None
    resamples: int
    left_out: float  # exact: an upper bound on the mass of the outputs not scored
    output: str  # the output drawn from the conditional (a sample of what the model writes, given valid)

    def to_state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, d: dict) -> "PValidRun":
        return cls(**d)


def _mean(xs: Sequence[float]) -> float | None:
    return math.fsum(xs) / len(xs) if xs else None


def p_valid_rows(runs: Sequence[PValidRun]) -> list[dict]:
    """Per schema (in the runs' order): P(valid) shown and withheld (each the mean over the
    schema's prompts), the ratio shown / withheld (None where withheld is 0 or missing),
    per prompt, the methods used and the smallest ESS of the particles' runs."""
    by_schema: dict[str, list[PValidRun]] = {}
    for r in runs:
        by_schema.setdefault(r.schema, []).append(r)
    rows = []
    for schema, rs in by_schema.items():
        of = {c: [r for r in rs if r.condition == c] for c in ("shown", "withheld")}
        shown = _mean([r.p_valid for r in of["shown"]])
        withheld = _mean([r.p_valid for r in of["withheld"]])
        ess = [r.ess_min for r in rs if r.ess_min is not None]
        rows.append(
            {
                "schema": schema,
                "prompts": len({r.prompt_index for r in rs}),
                "particles": rs[0].particles,
                "p_valid_shown": shown,
                "p_valid_withheld": withheld,
                "ratio": shown / withheld if shown is not None and withheld else None,
                "per_prompt": [
                    {"prompt_index": r.prompt_index, "condition": r.condition, "p_valid": r.p_valid, "method": r.method}
                    for r in rs
                ],
                "methods": sorted({r.method for r in rs}),
                "ess_min": min(ess) if ess else None,
            }
        )
    return rows
