"""The collapse study (diagnostics.md, "The collapse study"): running it.

Each generation is sampled once, at the reference setting; every step's captured
logits row is then evaluated at every (temperature, top_p) cell of a grid with the
per-step statistics of `stats.py` (the same-logit counterfactual), and only the
per-cell flags are kept, so memory does not grow with the vocabulary.

    study = CollapseStudy(model, [load_constraint(schema="samples/conj.json")], ["Conjugate 'comer'"],
                          StudySettings(seeds=(0, 1, 2, 3)))
    report = study.run()            # a CollapseReport; report.to_dict() is the --out JSON

Generations run token by token (no fast-forward) and, as `gen` does, narrow the legal
set near the end of the token budget so that a complete output still fits. The study's
statistics are about the model's own steps under the grammar's mask: a step whose mask
the budget narrowed is not a free step of the statistics (as a forced one is not).

Conditions: "shown" puts the schema text in the user message, "withheld" does not; for
each (schema, prompt, seed) both run with the same seed, so they pair. A constraint
that is not a schema has no text to show: it runs "withheld" only.

The think arm (`think`): every condition also runs thinking first ("shown+think",
"withheld+think"), on the same seeds: only the answer's steps are recorded, so each row
of the report compares Z and collapse of the answer constrained from token 0 with the
answer after room to reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.grid import (
    GenerationGrid,
    StudySettings,
)
from ministruct.diagnostics.collapse.report import CollapseReport
from ministruct.diagnostics.stats import FREE, StepRecord, StepStats
from ministruct.engine.budget import output_budget
from ministruct.engine.matcher import Matcher
from ministruct.errors import BudgetTooSmall, UsageError
from ministruct.jobs.job import GenerationJob

THINK_ARM = "+think"

if TYPE_CHECKING:
    from ministruct.decode.loop import Step
    from ministruct.decode.model import Model
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.think import ThinkSettings


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
        records = [s.compute(step.logits, step.mask, step=step.index) for s in self._stats]
        self.add_records(records, narrowed=step.budget_limited)

    def add_records(self, records: Sequence[StepRecord], *, narrowed: bool = False) -> None:
        """One step's records, one per cell in order; `narrowed`: the token budget narrowed
        its mask (the step is then not free: its mask is not the grammar's own)."""
        if len(records) != len(self.cells):
            raise ValueError(f"{len(records)} records for {len(self.cells)} cells")
        r0 = records[self.primary]
        self._rows.append(
            (
                r0.Z,
                r0.tag == FREE and not narrowed,
                r0.top_changed,
                [r.collapsed for r in records],
                [r.nucleus_changed for r in records],
            )
        )

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
        *,
        think: "ThinkSettings | None" = None,
    ) -> None:
        if not constraints:
            raise UsageError("the collapse study needs a constraint", parameter="schema")
        if not prompts:
            raise UsageError("the collapse study needs a prompt", parameter="prompt")
        self.model = model
        self.constraints = list(constraints)
        self.prompts = list(prompts)
        self.settings = settings
        self.think = think
        self.notes: list[str] = []  # what the report should say about how it ran
        self.jobs = [self._job(c, None) for c in self.constraints]
        self.think_jobs = [self._job(c, think) for c in self.constraints] if think is not None else []

    def _job(self, c: "Constraint", think: "ThinkSettings | None") -> GenerationJob:
        s = self.settings
        # token by token: the study's statistics are about the model's own steps; the budget
        # is kept as gen keeps it (the think arm cuts plainly: its answer has what is left)
        job = GenerationJob(
            model=self.model,
            constraint=c,
            params=s.params,
            max_tokens=s.max_tokens,
            chat=s.chat,
            system=s.system,
            fast_forward=False,
            budget_aware=think is None,
            think=think,
        )
        if think is None:
            try:
                output_budget(Matcher(job.compiled).min_tokens_to_complete(), s.max_tokens)
            except BudgetTooSmall as e:  # gen would refuse; the study still shows the steps, cut plainly
                job.budget_aware = False
                self.notes.append(f"{c.source}: {e}: its generations are cut plainly, never complete")
        return job

    def conditions(self, c: "Constraint") -> tuple[str, ...]:
        """The conditions run for a constraint (a non-schema has no text to show), each
        also as `+think` with the think arm."""
        base = ("withheld",) if c.kind != "schema" else self.settings.conditions
        return base + (tuple(f"{b}{THINK_ARM}" for b in base) if self.think is not None else ())

    @property
    def n_generations(self) -> int:
        per = len(self.prompts) * len(self.settings.seeds)
        return sum(per * len(self.conditions(c)) for c in self.constraints)

    def run(self, on_generation: Callable[[GenerationGrid], None] | None = None) -> CollapseReport:
        """Run every generation (shown and withheld of one seed back to back)."""

        evaluated = self.settings.evaluated
        recorder = GridRecorder(evaluated, primary=evaluated.index(self.settings.reference))
        gens: list[GenerationGrid] = []
        try:
            for i, c in enumerate(self.constraints):
                for pi, prompt in enumerate(self.prompts):
                    for seed in self.settings.seeds:
                        for cond in self.conditions(c):
                            job = self.think_jobs[i] if cond.endswith(THINK_ARM) else self.jobs[i]
                            job.show_schema = cond.removesuffix(THINK_ARM) == "shown"
                            dec = job.decoder(prompt, seed=seed)
                            for step in dec.steps():
                                if step.phase != "think":  # the answer's steps alone
                                    recorder.add_step(step)
                            res = dec.result
                            g = recorder.finish(
                                schema=c.source,
                                prompt=prompt,
                                prompt_index=pi,
                                condition=cond,
                                seed=seed,
                                complete=res.complete,
                                stop_reason=res.stop_reason,
                                output=res.text,
                            )
                            gens.append(g)
                            if on_generation is not None:
                                on_generation(g)
        finally:
            for job in self.jobs + self.think_jobs:
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
            **({"think": {"close": self.think.close, "think_tokens": self.think.think_tokens}} if self.think else {}),
        }
