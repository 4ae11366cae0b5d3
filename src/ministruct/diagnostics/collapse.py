"""The collapse study (diagnostics.md, "The collapse study"): running it.

Each generation is sampled once, at the reference setting; every step's captured
logits row is then evaluated at every (temperature, top_p) cell of a grid with the
per-step statistics of `stats.py` (the same-logit counterfactual), and only the
per-cell flags are kept, so memory does not grow with the vocabulary.

    study = CollapseStudy(model, [load_constraint(schema="samples/conj.json")], ["Conjugate 'comer'"],
                          StudySettings(seeds=(0, 1, 2, 3)))
    report = study.run()            # a CollapseReport; report.to_dict() is the --out JSON

Conditions: "shown" puts the schema text in the user message, "withheld" does not; for
each (schema, prompt, seed) both run with the same seed, so they pair. A constraint
that is not a schema has no text to show: it runs "withheld" only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..errors import UsageError
from ..pipeline import SCHEMA_INSTRUCTION, GenerationJob
from ..sampling import SamplingParams
from .stats import FREE, StepRecord, StepStats

if TYPE_CHECKING:
    from ..constraints import Constraint
    from ..generate import Step
    from ..model import Model
    from .collapse_report import CollapseReport

CONDITIONS = ("shown", "withheld")
DEFAULT_TEMPERATURES = (0.0, 0.3, 0.5, 0.7, 1.0, 1.5)
DEFAULT_TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)
REFERENCE = (0.7, 0.9)


@dataclass(frozen=True)
class Grid:
    """The (temperature, top_p) cells every step is re-evaluated at, temperature-major."""

    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    top_ps: tuple[float, ...] = DEFAULT_TOP_PS

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        object.__setattr__(self, "top_ps", tuple(float(p) for p in self.top_ps))
        for name, values in (("--temperatures", self.temperatures), ("--top-ps", self.top_ps)):
            if not values:
                raise UsageError(f"{name} needs at least one value")
            dup = sorted({v for v in values if values.count(v) > 1})
            if dup:
                raise UsageError(f"{name}: {dup[0]:g} is given twice")
        for t in self.temperatures:
            if not (math.isfinite(t) and t >= 0):
                raise UsageError(f"--temperatures: each value must be >= 0, got {t:g}")
        for p in self.top_ps:
            if not (0 < p <= 1):
                raise UsageError(f"--top-ps: each value must be in (0, 1], got {p:g}")

    @property
    def cells(self) -> list[tuple[float, float]]:
        return [(t, p) for t in self.temperatures for p in self.top_ps]


@dataclass(frozen=True)
class StudySettings:
    """Everything but the model, the schemas and the prompts.

    `params` is the reference setting the generations are sampled at (its seed is
    replaced by each of `seeds`).
    """

    seeds: tuple[int, ...] = (0, 1, 2, 3)
    grid: Grid = field(default_factory=Grid)
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=REFERENCE[0], top_p=REFERENCE[1]))
    conditions: tuple[str, ...] = CONDITIONS
    max_tokens: int = 128
    chat: bool = True
    system: str | None = None

    def __post_init__(self) -> None:
        if not self.seeds:
            raise UsageError("--seeds: give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise UsageError("--seeds: a seed is given twice")
        bad = [c for c in self.conditions if c not in CONDITIONS]
        if bad or not self.conditions:
            raise UsageError(f"conditions must be among {', '.join(CONDITIONS)}, got {list(self.conditions)}")

    @property
    def reference(self) -> tuple[float, float]:
        return (self.params.temperature, self.params.top_p)

    @property
    def evaluated(self) -> list[tuple[float, float]]:
        """The grid's cells, then the reference setting when the grid lacks it."""
        cells = self.grid.cells
        return cells if self.reference in cells else [*cells, self.reference]

    def to_dict(self) -> dict:
        return {
            "reference": {"temperature": self.params.temperature, "top_p": self.params.top_p},
            "sampling": {k: v for k, v in self.params.to_dict().items() if k != "seed"},
            "seeds": list(self.seeds),
            "temperatures": list(self.grid.temperatures),
            "top_ps": list(self.grid.top_ps),
            "conditions": list(self.conditions),
            "max_tokens": self.max_tokens,
            "chat": self.chat,
            "system": self.system,
            "schema_instruction": SCHEMA_INSTRUCTION,
            "step_statistics_over": "free steps",
        }


@dataclass
class GenerationGrid:
    """One generation, and its per-step flags at each evaluated (temperature, top_p).

    Columns of `collapsed` / `nucleus_changed` follow `StudySettings.evaluated`.
    Z, the forced/free tag and top_changed do not depend on the cell.
    """

    schema: str
    prompt: str
    prompt_index: int
    condition: str
    seed: int
    Z: np.ndarray  # (n_steps,) float64
    free: np.ndarray  # (n_steps,) bool
    top_changed: np.ndarray  # (n_steps,) bool
    collapsed: np.ndarray  # (n_steps, n_cells) bool
    nucleus_changed: np.ndarray  # (n_steps, n_cells) bool
    complete: bool = True
    stop_reason: str = "grammar_done"
    output: str = ""

    @property
    def n_steps(self) -> int:
        return int(self.Z.shape[0])

    @property
    def n_free(self) -> int:
        return int(np.count_nonzero(self.free))

    @property
    def pair_key(self) -> tuple[str, int, int]:
        return (self.schema, self.prompt_index, self.seed)

    def mean_Z(self) -> float | None:
        """Mean Z over the free steps (None without free steps)."""
        z = self.Z[self.free]
        return math.fsum(z.tolist()) / z.shape[0] if z.shape[0] else None

    def to_record(self, ref: int) -> dict:
        """The report's `generations` row; `collapsed` counts free steps collapsed at column `ref`."""
        return {
            "schema": self.schema,
            "prompt": self.prompt,
            "prompt_index": self.prompt_index,
            "condition": self.condition,
            "seed": self.seed,
            "complete": self.complete,
            "stop_reason": self.stop_reason,
            "n_steps": self.n_steps,
            "n_free": self.n_free,
            "n_forced": self.n_steps - self.n_free,
            "mean_Z": self.mean_Z(),
            "collapsed": int(np.count_nonzero(self.collapsed[self.free, ref])),
            "output": self.output,
        }


class GridRecorder:
    """Evaluates each step at every cell and keeps one row of flags per step (no logits).

    Z, the tag and top_changed are taken from the cell at index `primary` (the reference
    setting in a study): they agree across cells up to the last bits of Z.
    """

    def __init__(self, cells: Sequence[tuple[float, float]], primary: int = 0) -> None:
        self.cells = list(cells)
        self.primary = primary
        self._stats = [StepStats(SamplingParams(temperature=t, top_p=p)) for t, p in self.cells]
        self._rows: list[tuple[float, bool, bool, list[bool], list[bool]]] = []

    def add_step(self, step: "Step") -> None:
        """Evaluate one decoder Step's captured logits and mask at every cell."""
        self.add_records([s.compute(step.logits, step.mask, step=step.index) for s in self._stats])

    def add_records(self, records: Sequence[StepRecord]) -> None:
        """One step's records, one per cell in order."""
        if len(records) != len(self.cells):
            raise ValueError(f"{len(records)} records for {len(self.cells)} cells")
        r0 = records[self.primary]
        self._rows.append((
            r0.Z, r0.tag == FREE, r0.top_changed,
            [r.collapsed for r in records], [r.nucleus_changed for r in records],
        ))

    def finish(self, **meta) -> GenerationGrid:
        """The generation's arrays (meta: the GenerationGrid's other fields); starts afresh."""
        rows, n, c = self._rows, len(self._rows), len(self.cells)
        self._rows = []
        return GenerationGrid(
            Z=np.array([r[0] for r in rows], dtype=np.float64),
            free=np.array([r[1] for r in rows], dtype=bool),
            top_changed=np.array([r[2] for r in rows], dtype=bool),
            collapsed=np.array([r[3] for r in rows], dtype=bool).reshape(n, c),
            nucleus_changed=np.array([r[4] for r in rows], dtype=bool).reshape(n, c),
            **meta,
        )


class CollapseStudy:
    """Schemas x prompts x seeds x conditions, each sampled once and evaluated over the grid."""

    def __init__(
        self,
        model: "Model",
        constraints: Sequence["Constraint"],
        prompts: Sequence[str],
        settings: StudySettings,
    ) -> None:
        if not constraints:
            raise UsageError("the collapse study needs a constraint (--schema)")
        if not prompts:
            raise UsageError("the collapse study needs a prompt (PROMPT or --input)")
        self.model = model
        self.constraints = list(constraints)
        self.prompts = list(prompts)
        self.settings = settings
        s = settings
        self.jobs = [
            GenerationJob(model, c, s.params, max_tokens=s.max_tokens, chat=s.chat, system=s.system)
            for c in self.constraints
        ]

    def conditions(self, c: "Constraint") -> tuple[str, ...]:
        """The conditions run for a constraint (a non-schema has no text to show)."""
        if c.kind != "schema":
            return ("withheld",)
        return self.settings.conditions

    @property
    def n_generations(self) -> int:
        per = len(self.prompts) * len(self.settings.seeds)
        return sum(per * len(self.conditions(c)) for c in self.constraints)

    def run(self, on_generation: Callable[[GenerationGrid], None] | None = None) -> "CollapseReport":
        """Run every generation (shown and withheld of one seed back to back)."""
        from .collapse_report import CollapseReport

        evaluated = self.settings.evaluated
        recorder = GridRecorder(evaluated, primary=evaluated.index(self.settings.reference))
        gens: list[GenerationGrid] = []
        try:
            for c, job in zip(self.constraints, self.jobs):
                for pi, prompt in enumerate(self.prompts):
                    for seed in self.settings.seeds:
                        for cond in self.conditions(c):
                            job.show_schema = cond == "shown"
                            dec = job.decoder(prompt, seed=seed)
                            for step in dec.steps():
                                recorder.add_step(step)
                            res = dec.result
                            g = recorder.finish(
                                schema=c.source, prompt=prompt, prompt_index=pi, condition=cond, seed=seed,
                                complete=res.complete, stop_reason=res.stop_reason, output=res.text,
                            )
                            gens.append(g)
                            if on_generation is not None:
                                on_generation(g)
        finally:
            for job in self.jobs:
                job.persist()
        return CollapseReport(self.settings, gens, self.describe())

    def describe(self) -> dict:
        """The report's settings beyond StudySettings: model, constraints, prompts."""
        return {
            "model": self.model.name,
            "model_path": str(self.model.path),
            "constraint": self.constraints[0].kind,
            "schemas": [c.source for c in self.constraints],
            "prompts": list(self.prompts),
        }
