"""Running a whole study into a report folder, resumably.

The folder holds `data.jsonl`: a header naming the study (a fingerprint of the model
file, the settings, the schemas and the prompts), then one line per finished
generation (constrained or free control), flushed as it finishes. `resume=True`
reads the lines back, skips what is there and runs the rest; a line cut off by a kill
is dropped (and run again). The report is computed from the lines in plan order, so a
resumed study ends with the same report as an uninterrupted one.

With `parallel` > 1 the generations are decoded together (decode/batched.py) in blocks
of the plan (`StudyRun.blocks`), each from an empty context: a block's outcomes depend on
its own generations alone, so resuming is exact at the granularity of a block (the
block a kill cut off is run again whole; its lines already written are kept). The
header names `parallel`, and a resume keeps it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ministruct.decode.defaults import DEFAULT_PARALLEL, checked_parallel
from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.defaults import BLOCK_PER_SLOT
from ministruct.diagnostics.collapse.grid import GenerationGrid, Grid, StudySettings
from ministruct.diagnostics.collapse.p_valid import DEFAULT_PARTICLES, PValidRun
from ministruct.diagnostics.collapse.report import CollapseReport
from ministruct.diagnostics.collapse.study import CollapseStudy, FreeRun, Unit
from ministruct.diagnostics.collapse.studyfile import StudySpec
from ministruct.errors import InputError, OutputError, UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema.options import SchemaOptions
from ministruct.jobs.records import RECORD_VERSION

if TYPE_CHECKING:
    from ministruct.decode.model import Model

DATA = "data.jsonl"


@dataclass
class StudyResult:
    """A finished study: the constrained generations' report and the free control."""

    report: CollapseReport
    free: list[FreeRun]
    ran: int  # generations computed in this run (the others were read back)
    rerun: int = 0  # of those, already in the folder: run again with their cut-off block
    parallel: int = 1  # generations decoded at once
    p_valid: list[PValidRun] = field(default_factory=list)  # P(valid) shown vs withheld (p_valid.py)


def build_study(
    spec: StudySpec,
    model: "Model",
    *,
    options: SchemaOptions | None = None,
    seeds: tuple[int, ...] | None = None,
    base: SamplingParams | None = None,
) -> CollapseStudy:
    """The CollapseStudy a study file describes (`seeds` overrides the file's). The
    schemas compile with position marks; `base` gives the sampler's other settings
    (top_k, repeat_penalty), the file the reference temperature and top_p."""
    opts = options or SchemaOptions()
    opts = SchemaOptions(**{**opts.to_dict(), "marks": True})
    constraints = [Constraint.from_json_schema(s.schema, opts, source=s.name) for s in spec.schemas]
    t, p = spec.reference
    params = SamplingParams(
        temperature=t,
        top_p=p,
        top_k=base.top_k if base else 0,
        repeat_penalty=base.repeat_penalty if base else 1.0,
    )
    settings = StudySettings(
        seeds=spec.seeds if seeds is None else seeds,
        grid=Grid(spec.temperatures, spec.top_ps),
        params=params,
        conditions=spec.conditions,
        max_tokens=spec.max_tokens,
        chat=spec.chat,
        system=spec.system,
    )
    return CollapseStudy(model, constraints, [], settings, prompts_of=[s.prompts for s in spec.schemas])


def fingerprint(study: CollapseStudy, free_control: bool, p_valid_particles: int = 0) -> str:
    """What must be equal for a folder's lines to belong to this study."""
    m = study.model
    try:
        st = os.stat(m.path)
        model_id = f"{Path(m.path).name}:{st.st_size}"
    except OSError:
        model_id = str(m.path)
    what = {
        "v": RECORD_VERSION,
        "model": model_id,
        "settings": study.settings.to_dict(),
        "schemas": [(c.source, c.text) for c in study.constraints],
        "prompts": study.prompts_of,
        "free_control": free_control,
        **({"p_valid_particles": p_valid_particles} if p_valid_particles else {}),
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


class StudyRun:
    """A study writing its generations to `folder` (see the module)."""

    def __init__(
        self,
        study: CollapseStudy,
        folder: str,
        *,
        free_control: bool = True,
        resume: bool = False,
        parallel: int | None = 1,
        p_valid_particles: int = DEFAULT_PARTICLES,
    ) -> None:
        if parallel is not None:
            checked_parallel(parallel)
        if p_valid_particles:  # 0: no P(valid) runs
            SamplingParams(particles=p_valid_particles)  # the same range as gen --particles
        self.study = study
        self.requested_parallel = parallel  # None: the folder's, else DEFAULT_PARALLEL
        self.parallel = parallel or DEFAULT_PARALLEL
        self.folder = Path(folder)
        self.free_control = free_control
        self.resume = resume
        self.p_valid_particles = p_valid_particles
        self.key = fingerprint(study, free_control, p_valid_particles)
        self.units = study.plan()
        self.free_units = study.free_plan() if free_control else []
        self.p_valid_units = study.p_valid_plan() if p_valid_particles else []

    @property
    def path(self) -> Path:
        return self.folder / DATA

    def _read(self) -> tuple[dict[str, dict], int, int]:
        """The lines already there (by unit key), the byte length of the whole lines, and
        the `parallel` to run with (the folder's, when it names one)."""
        wanted = self.requested_parallel
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}, 0, wanted or DEFAULT_PARALLEL
        except OSError as e:
            raise InputError(f"{self.path}: cannot read: {e.strerror or e}") from None
        done: dict[str, dict] = {}
        good = 0
        ran_with = wanted or DEFAULT_PARALLEL
        lines = raw.split(b"\n")
        for i, line in enumerate(lines[:-1]):  # the part after the last newline is unfinished
            try:
                rec = json.loads(line)
            except ValueError:
                raise InputError(f"{self.path}: line {i + 1} is not JSON: the folder is not a study's") from None
            if i == 0:
                if rec.get("type") != "header":
                    raise InputError(f"{self.path}: line 1 is not a study header")
                if rec.get("study") != self.key:
                    raise UsageError(
                        f"{self.folder}: holds a different study (model, settings, schemas or prompts differ); "
                        "choose another --report folder"
                    )
                ran_with = int(rec.get("parallel", 1))
                if wanted is not None and wanted != ran_with:
                    raise UsageError(
                        f"{self.folder}: the study there runs with parallel={ran_with}, not {wanted}: "
                        "resume it with the same parallel (batched draws differ with it)",
                        parameter="parallel",
                    )
            else:
                done[rec["key"]] = rec
            good += len(line) + 1
        if not good:
            return {}, 0, wanted or DEFAULT_PARALLEL
        return done, good, ran_with

    def run(self, on_done: Callable[[int, int], None] | None = None) -> StudyResult:
        """Run what is missing; `on_done(done, total)` after each generation written."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise InputError(f"{self.folder}: cannot create the report folder: {e.strerror or e}") from None
        done, good, parallel = self._read()
        if good and not self.resume:
            raise UsageError(
                f"{self.folder}: already holds a study ({len(done)} generations): "
                "--resume continues it, or choose another --report folder"
            )
        self.parallel = parallel
        plan = self.units + self.free_units
        total = len(plan) + len(self.p_valid_units)
        ran = rerun = 0
        try:
            f = open(self.path, "r+b" if good else "wb")
            f.truncate(good)
            f.seek(good)
        except OSError as e:
            raise OutputError(f"{self.path}: cannot write: {e.strerror or e}") from None
        batch = None
        if parallel > 1:
            from ministruct.decode.batched import BatchedDecoder

            batch = BatchedDecoder(self.study.model, parallel, n_ctx=self.study.context_need())
        with f:
            if not good:
                self._write(f, {"type": "header", "v": RECORD_VERSION, "study": self.key, "parallel": parallel})
            count = sum(u.key in done for u in plan + self.p_valid_units)
            if on_done is not None:
                on_done(count, total)
            try:
                for block in self.blocks():
                    if all(u.key in done for u in block):
                        continue
                    todo = block if batch is not None else [u for u in block if u.key not in done]
                    for unit, outcome in self.study.run_units(todo, parallel=parallel, batch=batch):
                        ran += 1
                        if unit.key in done:  # run again for its block's schedule (the same outcome)
                            rerun += 1
                            continue
                        rec = {
                            "type": "free" if unit.condition == "free" else "generation",
                            "key": unit.key,
                            "state": outcome.to_state(),
                        }
                        self._write(f, rec)
                        done[unit.key] = rec
                        count += 1
                        if on_done is not None:
                            on_done(count, total)
                if batch is not None:
                    batch.close()
                    batch = None
                for unit in self.p_valid_units:
                    if unit.key in done:
                        continue
                    state = self.study.run_p_valid(unit, self.p_valid_particles).to_state()
                    ran += 1
                    done[unit.key] = rec = {"type": "p_valid", "key": unit.key, "state": state}
                    self._write(f, rec)
                    count += 1
                    if on_done is not None:
                        on_done(count, total)
            finally:
                if batch is not None:
                    batch.close()
                self.study.persist()
                self.study.close()
        n_cells = len(self.study.settings.evaluated)
        gens = [GenerationGrid.from_state(done[u.key]["state"], n_cells) for u in self.units]
        free = [FreeRun.from_state(done[u.key]["state"]) for u in self.free_units]
        p_valid = [PValidRun.from_state(done[u.key]["state"]) for u in self.p_valid_units]
        report = CollapseReport(self.study.settings, gens, self.study.describe())
        return StudyResult(report, free, ran, rerun, parallel, p_valid)

    def blocks(self) -> list[list[Unit]]:
        """The plan in the blocks it runs in: one generation each at `parallel` 1, else
        BLOCK_PER_SLOT x `parallel` generations decoded together from an empty context, so
        that a block's outcomes depend on its own generations alone and a resumed study
        ends with the same report (a block cut off by a kill is run again whole)."""
        plan = self.units + self.free_units
        size = 1 if self.parallel == 1 else BLOCK_PER_SLOT * self.parallel
        return [plan[i : i + size] for i in range(0, len(plan), size)]

    @staticmethod
    def _write(f, rec: dict) -> None:
        try:
            f.write((json.dumps(rec, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8"))
            f.flush()
        except OSError as e:
            raise OutputError(f"cannot write the study data: {e.strerror or e}") from None
