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

Each step also carries its grammar position (engine/positions.py: read from the parser's
configurations, exact for a schema compiled with marks) and the order-of-operations
comparison at the reference setting (order.py). The free control runs the same prompts,
schema shown, without the constraint (FreeRun).
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

import numpy as np

from ministruct.decode.loop import Decoder
from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.grid import (
    GenerationGrid,
    StudySettings,
)
from ministruct.diagnostics.collapse.order import compare_orders
from ministruct.diagnostics.collapse.p_valid import CONDITION_PREFIX as P_VALID
from ministruct.diagnostics.collapse.p_valid import PValidRun, p_valid_params
from ministruct.diagnostics.collapse.report import CollapseReport
from ministruct.diagnostics.stats import FREE, StepRecord, StepStats
from ministruct.engine.budget import output_budget
from ministruct.engine.matcher import Matcher
from ministruct.errors import BudgetTooSmall, MinistructError, UsageError
from ministruct.jobs.job import GenerationJob, user_message

THINK_ARM = "+think"

if TYPE_CHECKING:
    from ministruct.decode.batched import BatchedDecoder
    from ministruct.decode.loop import Generation, Step
    from ministruct.decode.model import Model
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.think import ThinkSettings


class GridRecorder:
    """Evaluates each step at every cell and keeps one row of flags per step (no logits).

    Z, the tag and top_changed are taken from the cell at index `primary` (the reference
    setting in a study): they agree across cells up to the last bits of Z. The order of
    operations is compared at the primary cell.
    """

    def __init__(self, cells: Sequence[tuple[float, float]], primary: int = 0) -> None:
        self.cells = list(cells)
        self.primary = primary
        # one StepStats per temperature, evaluating all of its top_p cells at once
        by_t: dict[float, list[int]] = {}
        for i, (t, _) in enumerate(self.cells):
            by_t.setdefault(t, []).append(i)
        self._by_t = [
            (StepStats(SamplingParams(temperature=t)), idx, [self.cells[i][1] for i in idx]) for t, idx in by_t.items()
        ]
        self._rows: list[tuple[float, bool, bool, list[bool], list[bool], int, int]] = []
        self._order: list[tuple[bool, float]] = []
        self.pieces: list[bytes] = []

    def add_step(self, step: "Step") -> None:
        """Evaluate one decoder Step's captured logits and mask at every cell."""
        records: list = [None] * len(self.cells)
        for stats, idx, top_ps in self._by_t:
            for i, r in zip(idx, stats.compute_top_ps(step.logits, step.mask, top_ps, step=step.index)):
                records[i] = r
        self.add_records(records, narrowed=step.budget_limited)
        self.pieces.append(step.token)
        if step.mask is not None:
            t, p = self.cells[self.primary]
            o = compare_orders(step.logits, step.mask, t, p)
            self._order.append((o.empty, math.nan if o.tv is None else o.tv))

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
                r0.nucleus_raw,
                r0.nucleus_masked,
            )
        )

    def finish(self, **meta) -> GenerationGrid:
        """The generation's arrays (meta: the GenerationGrid's other fields); starts afresh."""
        rows, n, c = self._rows, len(self._rows), len(self.cells)
        order = self._order
        self._rows, self._order, self.pieces = [], [], []
        if order and len(order) == n:
            meta.setdefault("order_empty", np.array([o[0] for o in order], dtype=bool))
            meta.setdefault("order_tv", np.array([o[1] for o in order], dtype=np.float64))
        return GenerationGrid(
            Z=np.array([r[0] for r in rows], dtype=np.float64),
            free=np.array([r[1] for r in rows], dtype=bool),
            top_changed=np.array([r[2] for r in rows], dtype=bool),
            collapsed=np.array([r[3] for r in rows], dtype=bool).reshape(n, c),
            nucleus_changed=np.array([r[4] for r in rows], dtype=bool).reshape(n, c),
            nucleus_raw=np.array([r[5] for r in rows], dtype=np.int64),
            nucleus_masked=np.array([r[6] for r in rows], dtype=np.int64),
            **meta,
        )


@dataclass(frozen=True)
class Unit:
    """One generation of a study: constraint, prompt, seed and condition (by index and name)."""

    constraint: int
    prompt: int
    seed: int
    condition: str

    @property
    def key(self) -> str:
        return f"{self.constraint}/{self.prompt}/{self.seed}/{self.condition}"


@dataclass
class FreeRun:
    """One generation of the free control: the prompt with the schema shown, no constraint."""

    schema: str
    prompt: str
    prompt_index: int
    seed: int
    output: str
    stop_reason: str
    n_tokens: int

    def to_state(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, d: dict) -> "FreeRun":
        return cls(**d)


@dataclass(eq=False)
class UnderWay:
    """One generation of a study being run: its Decoder and its steps gathered (the
    answer's alone into `recorder`; every piece, for the positions)."""

    unit: Unit
    schema: str
    prompt: str
    decoder: Decoder
    recorder: GridRecorder | None  # None: the free control
    pieces: list[bytes] = field(default_factory=list)
    answer: list[bool] = field(default_factory=list)

    def on_step(self, step: "Step") -> None:
        if self.recorder is None:
            return
        self.pieces.append(step.token)
        self.answer.append(step.phase != "think")
        if self.answer[-1]:
            self.recorder.add_step(step)

    def finish(self, res: "Generation") -> "GenerationGrid | FreeRun":
        """The finished generation's grid (or the free control's run)."""
        u = self.unit
        if self.recorder is None:
            return FreeRun(self.schema, self.prompt, u.prompt, u.seed, res.text, res.stop_reason, res.n_tokens)
        rec, matcher = self.recorder, self.decoder.matcher
        runs = None
        if matcher is not None:  # every step's, the thinking's too: positions read the whole output
            runs = [r for r, a in zip(matcher.positions(self.pieces), self.answer) if a]
        tokens = [p.decode("utf-8", "replace") for p in rec.pieces]
        return rec.finish(
            schema=self.schema,
            prompt=self.prompt,
            prompt_index=u.prompt,
            condition=u.condition,
            seed=u.seed,
            complete=res.complete,
            stop_reason=res.stop_reason,
            output=res.text,
            positions=None if runs is None else [[(p.pointer, p.part, n) for p, n in r] for r in runs],
            tokens=tokens,
        )


class StepWorker:
    """Evaluates the grid for steps on a thread of its own, in the order they come, while
    the main thread drives the model (llama.cpp and numpy release the GIL); at most
    `limit` steps wait, so memory stays bounded when the model outruns it."""

    def __init__(self, limit: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ministruct-grid")
        self._room = threading.BoundedSemaphore(limit)
        self._error: BaseException | None = None

    def submit(self, fn: Callable, *args) -> Future:
        if self._error is not None:
            raise self._error
        self._room.acquire()
        return self._pool.submit(self._run, fn, args)

    def _run(self, fn: Callable, args: tuple) -> None:
        try:
            fn(*args)
        except BaseException as e:  # raised again on the main thread
            self._error = self._error or e
        finally:
            self._room.release()

    def checked(self, value):
        """`value`, unless a step failed (then its error is raised here)."""
        if self._error is not None:
            raise self._error
        return value

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _nothing() -> None:
    return None


class CollapseStudy:
    """Schemas x prompts x seeds x conditions, each sampled once and evaluated over the grid.

    `prompts` go with every constraint, or `prompts_of` gives each constraint its own.
    """

    def __init__(
        self,
        model: "Model",
        constraints: Sequence["Constraint"],
        prompts: Sequence[str],
        settings: StudySettings,
        *,
        prompts_of: Sequence[Sequence[str]] | None = None,
        think: "ThinkSettings | None" = None,
    ) -> None:
        if not constraints:
            raise UsageError("the collapse study needs a constraint", parameter="schema")
        self.prompts_of = (
            [list(p) for p in prompts_of] if prompts_of is not None else [list(prompts)] * len(constraints)
        )
        if len(self.prompts_of) != len(constraints) or not all(self.prompts_of):
            raise UsageError("the collapse study needs a prompt", parameter="prompt")
        self.model = model
        self.constraints = list(constraints)
        self.prompts = list(dict.fromkeys(p for ps in self.prompts_of for p in ps))
        self.settings = settings
        self.think = think
        self.notes: list[str] = []  # what the report should say about how it ran
        self.jobs = [self._job(c, None) for c in self.constraints]
        self._p_valid_jobs: dict[tuple[int, int], GenerationJob] = {}
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

    def plan(self) -> list[Unit]:
        """Every generation in run order (shown and withheld of one seed back to back)."""
        return [
            Unit(ci, pi, seed, cond)
            for ci, c in enumerate(self.constraints)
            for pi in range(len(self.prompts_of[ci]))
            for seed in self.settings.seeds
            for cond in self.conditions(c)
        ]

    def free_plan(self) -> list[Unit]:
        """The free control's generations: each schema's prompts and seeds, schema shown."""
        return [
            Unit(ci, pi, seed, "free")
            for ci, c in enumerate(self.constraints)
            if c.kind == "schema"
            for pi in range(len(self.prompts_of[ci]))
            for seed in self.settings.seeds
        ]

    def p_valid_plan(self) -> list[Unit]:
        """The P(valid) runs (p_valid.py): each schema's prompts under each of its
        conditions (the think arm's aside), with the first seed."""
        first = self.settings.seeds[0]
        return [
            Unit(ci, pi, first, f"{P_VALID}{cond}")
            for ci, c in enumerate(self.constraints)
            for pi in range(len(self.prompts_of[ci]))
            for cond in self.conditions(c)
            if not cond.endswith(THINK_ARM)
        ]

    def run_p_valid(self, unit: Unit, particles: int) -> PValidRun:
        """One P(valid) run of `p_valid_plan` with `particles` particles."""
        c = self.constraints[unit.constraint]
        prompt = self.prompts_of[unit.constraint][unit.prompt]
        condition = unit.condition.removeprefix(P_VALID)
        key = (unit.constraint, particles)
        if key not in self._p_valid_jobs:
            s, job = self.settings, self.jobs[unit.constraint]
            self._p_valid_jobs[key] = GenerationJob(
                model=self.model,
                constraint=c,
                params=p_valid_params(s.params, particles, unit.seed),
                max_tokens=s.max_tokens,
                chat=s.chat,
                system=s.system,
                budget_aware=job.budget_aware,
            )
        job = self._p_valid_jobs[key]
        job.show_schema = condition == "shown"
        dec = job.decoder(prompt, seed=unit.seed)
        for _ in dec.steps():
            pass
        gen = dec.result
        stats = gen.particles
        assert stats is not None
        return PValidRun(
            schema=c.source,
            prompt=prompt,
            prompt_index=unit.prompt,
            condition=condition,
            seed=unit.seed,
            particles=particles,
            method=stats.method,
            p_valid=stats.p_valid,
            ess_min=stats.ess_min,
            resamples=stats.resamples,
            left_out=stats.left_out,
            output=gen.text,
        )

    @property
    def n_generations(self) -> int:
        return len(self.plan())

    def start(self, unit: Unit) -> "UnderWay":
        """One generation of the plan (constrained or free control), not yet run: its
        Decoder, and what gathers its steps into a GenerationGrid or a FreeRun."""
        c = self.constraints[unit.constraint]
        prompt = self.prompts_of[unit.constraint][unit.prompt]
        s = self.settings
        if unit.condition == "free":
            ids = self.model.encode_prompt(user_message(prompt, c, show_schema=True), chat=s.chat, system=s.system)
            params = replace(s.params, seed=unit.seed)
            dec = Decoder(self.model, ids, None, params, max_tokens=s.max_tokens, fast_forward=False)
            return UnderWay(unit, c.source, prompt, dec, None)
        think = unit.condition.endswith(THINK_ARM)
        job = (self.think_jobs if think else self.jobs)[unit.constraint]
        job.show_schema = unit.condition.removesuffix(THINK_ARM) == "shown"
        dec = job.decoder(prompt, seed=unit.seed)
        evaluated = self.settings.evaluated
        return UnderWay(unit, c.source, prompt, dec, GridRecorder(evaluated, primary=evaluated.index(s.reference)))

    def run_one(self, unit: Unit) -> "GenerationGrid | FreeRun":
        """One generation of the plan, alone: a constrained one's steps evaluated over the
        grid and tagged by position, or a free control's output."""
        g = self.start(unit)
        for step in g.decoder.steps():
            g.on_step(step)
        return g.finish(g.decoder.result)

    def run_units(
        self, units: Iterable[Unit], *, parallel: int = 1, batch: "BatchedDecoder | None" = None
    ) -> Iterator[tuple[Unit, "GenerationGrid | FreeRun"]]:
        """Each unit's outcome as soon as it is finished: one at a time (`parallel` 1), or
        up to `parallel` at once in one model batch (decode/batched.py; `batch`, when
        given, is used and left open). Batched rows differ in the last bits from rows
        computed alone, so a draw can differ from `parallel` 1; the same units, seeds and
        `parallel` give the same outcomes."""
        if parallel == 1 and batch is None:
            for unit in units:
                yield unit, self.run_one(unit)
            return
        from ministruct.decode.batched import BatchedDecoder, Request

        own = batch is None
        if batch is None:
            batch = BatchedDecoder(self.model, parallel, n_ctx=self.context_need())
        worker = StepWorker(limit=8 * parallel)
        waiting: list[tuple[UnderWay, "Generation", Future]] = []
        try:
            gens = (self.start(u) for u in units)
            requests = (Request(g.decoder, on_step=partial(worker.submit, g.on_step), key=g) for g in gens)
            for req, outcome in batch.run(requests):
                if isinstance(outcome, MinistructError):
                    raise outcome
                waiting.append((req.key, outcome, worker.submit(_nothing)))
                while waiting and waiting[0][2].done():
                    g, res, _ = waiting.pop(0)
                    yield g.unit, g.finish(worker.checked(res))
            for g, res, fut in waiting:
                fut.result()
                yield g.unit, g.finish(worker.checked(res))
        finally:
            worker.close()
            if own:
                batch.close()

    def context_need(self) -> int:
        """The tokens one generation of the plan can fill at most (prompt + max_tokens)."""
        longest = max(len(self.start(u).decoder.prompt_tokens) for u in self._prompt_units())
        return min(self.model.n_ctx, longest + self.settings.max_tokens)

    def _prompt_units(self) -> list[Unit]:
        """One unit per distinct prompt text of the plan (the seed does not change it)."""
        first = self.settings.seeds[0]
        units = [u for u in self.plan() + self.free_plan() if u.seed == first]
        return units

    def run(
        self,
        on_generation: Callable[[GenerationGrid], None] | None = None,
        *,
        units: Iterable[Unit] | None = None,
        parallel: int = 1,
    ) -> CollapseReport:
        """Run every generation of the plan (or `units`) and report them, in plan order
        (`on_generation` sees each in that order); `parallel` as in run_units."""
        from ministruct.jobs.ordered import InOrder

        todo = list(self.plan() if units is None else units)
        order: InOrder[GenerationGrid] = InOrder()
        place = {u: order.add() for u in todo}
        gens: list[GenerationGrid] = []
        try:
            for unit, g in self.run_units(todo, parallel=parallel):
                order.put(place[unit], g)  # type: ignore[arg-type]
                for ready in order.ready():
                    gens.append(ready)
                    if on_generation is not None:
                        on_generation(ready)
        finally:
            self.persist()
        return CollapseReport(self.settings, gens, self.describe())

    def persist(self) -> None:
        """Save the compiled grammars' learned masks to the disk cache."""
        for job in [*self.jobs, *self.think_jobs, *self._p_valid_jobs.values()]:
            job.persist()

    def close(self) -> None:
        """Free the P(valid) runs' particle contexts."""
        for job in self._p_valid_jobs.values():
            job.close()
        self._p_valid_jobs.clear()

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
