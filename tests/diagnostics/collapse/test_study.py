"""The collapse study on the real bundled model: every grid cell agrees with stats.py on
the same generations, re-run independently, and shown/withheld pairs share seeds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.grid import Grid, StudySettings
from ministruct.diagnostics.collapse.study import CollapseStudy
from ministruct.diagnostics.stats import StepStats, summarize
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.job import GenerationJob

pytestmark = pytest.mark.model

CONJ = str(Path(__file__).resolve().parents[3] / "samples" / "conj.json")
PROMPT = "Conjugate 'comer', 3rd person, future"
REF = SamplingParams(temperature=0.7, top_p=0.9)
GRID = Grid((0.7, 1.0), (0.9, 1.0))


@pytest.fixture(scope="module")
def study(model):
    c = load_constraint(schema=CONJ)
    settings = StudySettings(seeds=(3, 5), grid=GRID, params=REF, max_tokens=12)
    seen = []
    report = CollapseStudy(model, [c], [PROMPT], settings).run(on_generation=seen.append)
    return c, report, seen


def test_generations_pair_over_the_same_seeds(study):
    _, report, seen = study
    gens = report.generations
    assert seen == gens
    assert [(g.condition, g.seed) for g in gens] == [("shown", 3), ("withheld", 3), ("shown", 5), ("withheld", 5)]
    for g in gens:
        assert g.n_steps >= 1 and g.n_free + int(np.count_nonzero(~g.free)) == g.n_steps
        assert g.collapsed.shape == g.nucleus_changed.shape == (g.n_steps, len(GRID.cells))
    obj = report.to_dict()
    assert [p["n_pairs"] for p in obj["paired"]] == [2, 2]
    assert {(r["seed"], r["condition"]) for r in obj["generations"]} == {
        (s, c) for s in (3, 5) for c in ("shown", "withheld")
    }


@pytest.fixture(scope="module")
def reruns(study, model):
    """Each generation run again, independently, with its seed and condition: its Steps."""
    c, report, _ = study
    out = []
    for g in report.generations:
        # token by token, as the study runs (it never fast-forwards); 12 tokens cannot hold a
        # complete output, so the study cuts plainly, as here
        job = GenerationJob(
            model, c, REF, max_tokens=12, show_schema=g.condition == "shown", fast_forward=False, budget_aware=False
        )
        dec = job.decoder(PROMPT, seed=g.seed)
        steps = list(dec.steps())
        out.append((g, steps, dec.result))
    return out


def test_every_cell_agrees_with_stats_on_an_independent_rerun(reruns):
    """StepStats at every cell on the re-run's captured steps gives exactly the study's flags."""
    for g, steps, result in reruns:
        assert result.text == g.output and result.complete == g.complete
        assert len(steps) == g.n_steps
        for col, (t, p) in enumerate(GRID.cells):
            stats = StepStats(SamplingParams(temperature=t, top_p=p))
            recs = [stats.compute(s.logits, s.mask) for s in steps]
            assert [r.collapsed for r in recs] == g.collapsed[:, col].tolist()
            assert [r.nucleus_changed for r in recs] == g.nucleus_changed[:, col].tolist()
            assert [r.tag == "free" for r in recs] == g.free.tolist()
            assert [r.top_changed for r in recs] == g.top_changed.tolist()
            z = [r.Z for r in recs]
            if (t, p) == (REF.temperature, REF.top_p):  # Z is taken from the reference cell
                assert z == g.Z.tolist()
            else:  # the same up to the last bits (stats.py's exact path depends on T)
                assert z == pytest.approx(g.Z.tolist(), rel=1e-9)


def test_reference_cell_matches_the_trace_records(study, reruns, model):
    """The reference cell's counts equal those of the trace's step records (StepStats.record
    at the sampling parameters, as `gen --trace` writes them) summarized per condition."""
    _, report, _ = study
    for cond in ("shown", "withheld"):
        free = collapsed = changed = 0
        z = []
        for g, steps, _ in [r for r in reruns if r[0].condition == cond]:
            stats = StepStats(replace(REF, seed=g.seed), model.vocabulary)
            records = [stats.record(s) for s in steps]
            s = summarize(records)
            assert (s.steps, s.free, s.forced) == (g.n_steps, g.n_free, g.n_steps - g.n_free)
            free += s.free
            collapsed += s.collapsed
            changed += sum(r.nucleus_changed for r in records if r.tag == "free")
            z += [r.Z for r in records if r.tag == "free"]
        cell = next(
            x
            for x in report.cells()
            if (x["schema"], x["condition"], x["temperature"], x["top_p"]) == ("all", cond, 0.7, 0.9)
        )
        assert (cell["free_steps"], cell["collapsed"], cell["nucleus_changed"]) == (free, collapsed, changed)
        assert cell["mean_Z"] == pytest.approx(sum(z) / len(z))
        assert cell["pooled_rate"] == pytest.approx(collapsed / free)


def test_report_is_consistent(study):
    _, report, _ = study
    obj = json.loads(report.dumps())
    assert obj["settings"]["seeds"] == [3, 5] and obj["settings"]["schemas"] == [CONJ]
    assert len(obj["cells"]) == 2 * 2 * len(GRID.cells)  # (schema, all) x conditions x cells
    by = {(c["schema"], c["condition"], c["temperature"], c["top_p"]): c for c in obj["cells"]}
    for (schema, cond, t, p), cell in by.items():
        gens = [g for g in obj["generations"] if g["condition"] == cond]
        assert cell["free_steps"] == sum(g["n_free"] for g in gens)
        if p == 1.0:
            assert cell["collapsed"] == 0 and cell["pooled_rate"] == 0.0
        if (t, p) == (0.7, 0.9):
            assert cell["collapsed"] == sum(g["collapsed"] for g in gens)
        assert by[("all", cond, t, p)] == {**cell, "schema": "all"}  # one schema: "all" is the same
    ref = {
        c["condition"]: c for c in obj["cells"] if c["schema"] == "all" and (c["temperature"], c["top_p"]) == (0.7, 0.9)
    }
    pair = obj["paired"][-1]
    assert pair["collapse_shown"] == ref["shown"]["pooled_rate"]
    assert pair["collapse_withheld"] == ref["withheld"]["pooled_rate"]
    assert pair["mean_paired_drop"] == pytest.approx(pair["mean_Z_shown"] - pair["mean_Z_withheld"])


def test_a_constraint_that_is_not_a_schema_runs_withheld_only(model):
    c = load_constraint(choice=["yes", "no"])
    settings = StudySettings(seeds=(0,), grid=Grid((1.0,), (0.9, 1.0)), params=REF, max_tokens=4)
    report = CollapseStudy(model, [c], ["Is the sky blue?"], settings).run()
    assert [g.condition for g in report.generations] == ["withheld"]
    obj = report.to_dict()
    assert obj["paired"] == [] and {c["condition"] for c in obj["cells"]} == {"withheld"}
    assert obj["generations"][0]["output"] in ("yes", "no") and obj["generations"][0]["complete"]


def test_the_study_keeps_the_budget_and_narrowed_steps_are_not_free(model):
    # issue 29: no budget narrowing, so 0 of 4 generations completed at max_tokens 60
    c = load_constraint(schema=CONJ)
    settings = StudySettings(seeds=(0, 1), grid=GRID, params=REF, max_tokens=60)
    study = CollapseStudy(model, [c], [PROMPT], settings)
    assert study.notes == []
    report = study.run()
    assert all(g.complete for g in report.generations), [
        (g.condition, g.seed, g.stop_reason) for g in report.generations
    ]
    for g in report.generations:
        job = GenerationJob(model, c, REF, max_tokens=60, show_schema=g.condition == "shown", fast_forward=False)
        dec = job.decoder(PROMPT, seed=g.seed)
        steps = list(dec.steps())
        assert len(steps) == g.n_steps
        for i, st in enumerate(steps):
            if st.budget_limited:
                assert not g.free[i]


def test_a_batched_study_keeps_the_plan_order_and_repeats_itself(model):
    """Three generations at a time (one model batch): the report lists them in plan
    order, every complete output is valid for the schema, and a second run with the same
    parallel and seeds gives the same report (batched rows differ from one-at-a-time
    rows in the last bits, so the outputs need not equal the serial study's)."""
    c = load_constraint(schema=CONJ)
    settings = StudySettings(seeds=(3, 5, 7), grid=GRID, params=REF, max_tokens=60)
    seen = []
    first = CollapseStudy(model, [c], [PROMPT], settings).run(on_generation=seen.append, parallel=3)
    assert seen == first.generations
    assert [(g.seed, g.condition) for g in first.generations] == [
        (s, cond) for s in (3, 5, 7) for cond in ("shown", "withheld")
    ]
    schema = json.loads(Path(CONJ).read_text())
    assert any(g.complete for g in first.generations)
    for g in first.generations:
        if g.complete:
            jsonschema.validate(json.loads(g.output), schema)
        assert g.collapsed.shape == (g.n_steps, len(GRID.cells))
    again = CollapseStudy(model, [c], [PROMPT], settings).run(parallel=3)
    assert again.to_dict() == first.to_dict()
