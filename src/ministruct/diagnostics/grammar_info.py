"""What a compiled grammar looks like on a vocabulary (for `ministruct inspect`).

Sizes of the grammar and its automaton, warnings, and the legal-set sizes |L| over
the parser configurations reached by a few seeded sample walks (bench.sample_walks),
whose outputs double as sample strings of the language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ministruct.diagnostics.bench import SampleWalk, sample_walks
from ministruct.engine.compile import CompiledGrammar

# Histogram buckets of legal-set sizes: (label, low, high inclusive).
BUCKETS = (
    ("1 (forced)", 1, 1),
    ("2-9", 2, 9),
    ("10-99", 10, 99),
    ("100-999", 100, 999),
    ("1k-9,999", 1000, 9999),
    ("10k+", 10000, None),
)


@dataclass
class LegalSizes:
    """Legal-set sizes over distinct parser configurations (EOG ids counted as legal)."""

    sizes: list[int]

    @property
    def n(self) -> int:
        return len(self.sizes)

    def histogram(self) -> list[tuple[str, int]]:
        a = np.asarray(self.sizes, dtype=np.int64)
        out = []
        for label, lo, hi in BUCKETS:
            sel = a >= lo if hi is None else (a >= lo) & (a <= hi)
            out.append((label, int(sel.sum())))
        return out

    def to_dict(self) -> dict:
        a = np.asarray(self.sizes, dtype=np.int64)
        return {
            "configurations": self.n,
            "min": int(a.min()) if a.size else None,
            "median": float(np.median(a)) if a.size else None,
            "max": int(a.max()) if a.size else None,
            "histogram": dict(self.histogram()),
        }


@dataclass
class GrammarInfo:
    """Everything `inspect` shows about a constraint without running the model."""

    constraint: dict  # Constraint.describe()
    gbnf: str
    rules: int
    stats: dict  # CompiledGrammar.stats()
    warnings: list[str] = field(default_factory=list)
    legal: LegalSizes = field(default_factory=lambda: LegalSizes([]))
    walks: list[SampleWalk] = field(default_factory=list)
    vocab_name: str = ""
    n_logits: int = 0

    def to_dict(self) -> dict:
        return {
            "constraint": self.constraint,
            "gbnf": self.gbnf,
            "rules": self.rules,
            "stats": self.stats,
            "warnings": list(self.warnings),
            "legal_sizes": self.legal.to_dict(),
            "samples": [w.to_dict() for w in self.walks],
            "vocab": self.vocab_name,
            "n_logits": self.n_logits,
        }


def grammar_info(
    compiled: CompiledGrammar,
    constraint: dict,
    *,
    warnings: list[str] | None = None,
    walks: int = 5,
    max_steps: int = 32,
    seed: int = 0,
    on_walk: Callable[[SampleWalk], None] | None = None,
) -> GrammarInfo:
    """Sizes, warnings, legal-set sizes and sample strings of a compiled grammar."""
    g = compiled.grammar
    found, sizes = sample_walks(compiled, n=walks, max_steps=max_steps, seed=seed, on_walk=on_walk)
    return GrammarInfo(
        constraint=constraint,
        gbnf=g.to_gbnf(),
        rules=len(g.rules),
        stats=compiled.stats(),
        warnings=list(warnings if warnings is not None else g.warnings),
        legal=LegalSizes(sizes),
        walks=found,
        vocab_name=compiled.vocab.name,
        n_logits=compiled.vocab.n_logits,
    )
