"""The collapse report's statistics on hand-made step records (no model)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.grid import Grid, StudySettings
from ministruct.diagnostics.collapse.report import (
    ALL,
    CollapseReport,
    cell_row,
    paired_row,
    pairs_of,
    pearson,
    rate_summary,
)
from ministruct.diagnostics.collapse.study import GridRecorder
from ministruct.diagnostics.stats import StepRecord, StepStats
from ministruct.errors import UsageError


def rec(
    *, free: bool = True, collapsed: bool = False, Z: float = 1.0, changed: bool = False, top: bool = False
) -> StepRecord:
    return StepRecord(
        step=0,
        token_id=0,
        token="",
        legal_count=5 if free else 1,
        Z=Z,
        kl=-math.log(Z),
        tag="free" if free else "forced",
        nucleus_raw=3,
        nucleus_masked=1 if collapsed or not free else 2,
        collapsed=collapsed,
        nucleus_changed=changed,
        top_changed=top,
        mask_us=0.0,
    )


def gen(steps: list[list[StepRecord]], *, schema="s.json", condition="shown", seed=0, prompt_index=0):
    """A GenerationGrid from per-step lists of records (one per cell)."""
    r = GridRecorder([(1.0, 0.9)] * len(steps[0]) if steps else [(1.0, 0.9)])
    for cells in steps:
        r.add_records(cells)
    return r.finish(schema=schema, prompt="p", prompt_index=prompt_index, condition=condition, seed=seed)


def one_cell(*records: StepRecord, **kw):
    return gen([[r] for r in records], **kw)


def test_pooled_and_per_generation_rates_differ_as_defined():
    a = one_cell(rec(collapsed=True), rec(free=False), rec(free=False))  # 1 of 1 free collapsed
    b = one_cell(rec(collapsed=True), rec(), rec(), rec(free=False))  # 1 of 3
    row = cell_row([a, b], 0, schema="s", condition="shown", temperature=1.0, top_p=0.9)
    assert row["free_steps"] == 4 and row["collapsed"] == 2
    assert row["pooled_rate"] == pytest.approx(0.5)
    g = row["per_generation"]
    assert g["n"] == 2
    assert g["mean"] == pytest.approx((1 + 1 / 3) / 2)
    assert g["sd"] == pytest.approx(math.sqrt(((1 - 2 / 3) ** 2 + (1 / 3 - 2 / 3) ** 2) / 1))
    assert (g["min"], g["max"]) == (pytest.approx(1 / 3), 1.0)


def test_forced_steps_are_left_out_of_every_count():
    a = one_cell(rec(free=False, changed=True, top=True, Z=0.01), rec(Z=0.5, changed=True, top=True))
    row = cell_row([a], 0, schema="s", condition="shown", temperature=1.0, top_p=0.9)
    assert row["free_steps"] == 1
    assert (row["nucleus_changed"], row["top_changed"]) == (1, 1)
    assert row["mean_Z"] == pytest.approx(0.5)
    assert a.n_steps == 2 and a.n_free == 1


def test_one_generation_has_no_sd_and_no_free_steps_means_null():
    a = one_cell(rec(collapsed=True), rec())
    g = cell_row([a], 0, schema="s", condition="shown", temperature=1.0, top_p=0.9)["per_generation"]
    assert g["n"] == 1 and g["mean"] == 0.5 and g["sd"] is None
    only_forced = one_cell(rec(free=False))
    row = cell_row([only_forced], 0, schema="s", condition="shown", temperature=1.0, top_p=0.9)
    assert row["free_steps"] == 0
    assert row["pooled_rate"] is None and row["mean_Z"] is None and row["pearson_Z_collapsed"] is None
    assert row["per_generation"] == {"n": 0, "mean": None, "sd": None, "min": None, "max": None}


def test_pearson_null_on_zero_variance_and_matches_numpy():
    assert pearson([0.3, 0.3, 0.3], [0, 1, 1]) is None
    assert pearson([0.1, 0.5, 0.9], [1, 1, 1]) is None
    assert pearson([0.5], [1]) is None
    assert pearson([], []) is None
    x, y = [0.2, 0.9, 0.4, 0.95, 0.1], [1, 0, 1, 0, 0]
    assert pearson(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)


def test_pearson_in_a_cell_uses_free_steps_only():
    steps = [rec(Z=0.9, collapsed=True), rec(Z=0.2), rec(Z=0.8, collapsed=True), rec(free=False, Z=0.01)]
    row = cell_row([one_cell(*steps)], 0, schema="s", condition="shown", temperature=1.0, top_p=0.9)
    assert row["pearson_Z_collapsed"] == pytest.approx(np.corrcoef([0.9, 0.2, 0.8], [1, 0, 1])[0, 1])


def test_rate_summary():
    assert rate_summary([0.25]) == {"n": 1, "mean": 0.25, "sd": None, "min": 0.25, "max": 0.25}
    s = rate_summary([0.0, 1.0, 0.5])
    assert s["mean"] == pytest.approx(0.5) and s["sd"] == pytest.approx(0.5)


def test_paired_rows_pair_by_schema_prompt_and_seed():
    s0 = one_cell(rec(Z=0.9, collapsed=True), rec(Z=1.0), condition="shown", seed=0)
    w0 = one_cell(rec(Z=0.5), rec(Z=0.3, collapsed=True), rec(Z=0.1), condition="withheld", seed=0)
    s1 = one_cell(rec(Z=0.8), condition="shown", seed=1)
    w1 = one_cell(rec(Z=0.8, top=True, changed=True), condition="withheld", seed=1)
    lonely = one_cell(rec(Z=0.2), condition="withheld", seed=7)
    pairs = pairs_of([s0, w0, s1, w1, lonely])
    assert pairs == [(s0, w0), (s1, w1)]
    row = paired_row("s", pairs, 0)
    assert row["n_pairs"] == 2
    assert row["mean_Z_shown"] == pytest.approx((0.95 + 0.8) / 2)
    assert row["mean_Z_withheld"] == pytest.approx((0.3 + 0.8) / 2)
    assert row["mean_paired_drop"] == pytest.approx(((0.95 - 0.3) + 0.0) / 2)
    assert row["collapse_shown"] == pytest.approx(1 / 3) and row["collapse_withheld"] == pytest.approx(1 / 4)
    assert row["collapse_change"] == pytest.approx(1 / 4 - 1 / 3)
    assert (row["nucleus_changed_withheld"], row["top_changed_withheld"], row["top_changed_shown"]) == (1, 1, 0)


def _report(gens, grid=Grid((1.0,), (0.9,)), params=SamplingParams(temperature=1.0, top_p=0.9)):
    st_ = StudySettings(seeds=(0, 1), grid=grid, params=params)
    return CollapseReport(st_, gens, {"schemas": sorted({g.schema for g in gens})})


def test_report_rows_per_schema_then_all_and_no_nan():
    gens = [
        one_cell(rec(collapsed=True), schema="a.json", condition="shown", seed=0),
        one_cell(rec(), schema="a.json", condition="withheld", seed=0),
        one_cell(rec(free=False), schema="b.json", condition="shown", seed=0),
        one_cell(rec(free=False), schema="b.json", condition="withheld", seed=0),
    ]
    report = _report(gens)
    obj = json.loads(report.dumps())  # allow_nan=False: any NaN would raise
    assert obj["v"] == 1
    assert [(c["schema"], c["condition"]) for c in obj["cells"]] == [
        ("a.json", "shown"),
        ("a.json", "withheld"),
        ("b.json", "shown"),
        ("b.json", "withheld"),
        (ALL, "shown"),
        (ALL, "withheld"),
    ]
    b_shown = obj["cells"][2]
    assert b_shown["pooled_rate"] is None and b_shown["mean_Z"] is None
    all_shown = obj["cells"][4]
    assert all_shown["free_steps"] == 1 and all_shown["pooled_rate"] == 1.0
    assert [p["schema"] for p in obj["paired"]] == ["a.json", "b.json", ALL]
    assert obj["paired"][1]["mean_Z_shown"] is None and obj["paired"][1]["mean_paired_drop"] is None
    assert [g["n_free"] + g["n_forced"] == g["n_steps"] for g in obj["generations"]] == [True] * 4


def test_reference_outside_the_grid_is_evaluated_too():
    st_ = StudySettings(grid=Grid((0.0, 1.0), (0.5, 1.0)), params=SamplingParams(temperature=0.7, top_p=0.9))
    assert st_.evaluated == [(0.0, 0.5), (0.0, 1.0), (1.0, 0.5), (1.0, 1.0), (0.7, 0.9)]
    st2 = StudySettings(grid=Grid((0.7,), (0.9, 1.0)), params=SamplingParams(temperature=0.7, top_p=0.9))
    assert st2.evaluated == st2.grid.cells


@pytest.mark.parametrize(
    "temps, top_ps, needle",
    [
        ((), (0.9,), "--temperatures"),
        ((0.5, 0.5), (0.9,), "twice"),
        ((-0.1,), (0.9,), ">= 0"),
        ((float("nan"),), (0.9,), ">= 0"),
        ((1.0,), (0.0,), "(0, 1]"),
        ((1.0,), (1.5,), "(0, 1]"),
    ],
)
def test_grid_rejects_bad_values(temps, top_ps, needle):
    with pytest.raises(UsageError, match=re.escape(needle)):
        Grid(temps, top_ps)


def test_settings_reject_bad_seeds_and_conditions():
    with pytest.raises(UsageError):
        StudySettings(seeds=())
    with pytest.raises(UsageError):
        StudySettings(seeds=(1, 1))
    with pytest.raises(UsageError):
        StudySettings(conditions=("hidden",))


# -- on real per-step records computed by stats.py ----------------------------------------

TEMPS = (0.0, 0.5, 1.0)
TOP_PS = (0.5, 0.9, 1.0)


@st.composite
def generations(draw):
    """Generations of random logits and masks, recorded at every cell by StepStats."""
    cells = [(t, p) for t in TEMPS for p in TOP_PS]
    stats = [StepStats(SamplingParams(temperature=t, top_p=p)) for t, p in cells]
    out = []
    for i in range(draw(st.integers(1, 4))):
        r = GridRecorder(cells)
        for _ in range(draw(st.integers(0, 6))):
            n = draw(st.integers(2, 40))
            z = draw(hnp.arrays(np.float32, n, elements=st.floats(-20, 20, width=32)))
            mask = draw(hnp.arrays(np.bool_, n))
            assume(mask.any())
            r.add_records([s.compute(z, mask) for s in stats])
        out.append(r.finish(schema="s", prompt="p", prompt_index=0, condition="shown", seed=i))
    return cells, out


@settings(max_examples=60, deadline=None)
@given(generations())
def test_cell_laws_on_stats_records(data):
    cells, gens = data
    for col, (t, p) in enumerate(cells):
        row = cell_row(gens, col, schema="s", condition="shown", temperature=t, top_p=p)
        json.dumps(row, allow_nan=False)
        free = row["free_steps"]
        assert free == sum(g.n_free for g in gens)
        assert 0 <= row["collapsed"] <= free and row["nucleus_changed"] <= free and row["top_changed"] <= free
        if p == 1.0:  # nothing truncated: no collapse, by definition
            assert row["collapsed"] == 0 and row["pearson_Z_collapsed"] is None
        if free == 0 or (t == 0 and p == 1.0):  # (T 0 / top_p 1: two rules disagree, undefined)
            assert row["pooled_rate"] is None
            continue
        assert 0 <= row["pooled_rate"] <= 1
        # the pooled rate is the per-generation rates weighted by free steps
        weighted = sum(g.n_free * float(np.mean(g.collapsed[g.free, col])) for g in gens if g.n_free)
        assert row["pooled_rate"] == pytest.approx(weighted / free)
        g = row["per_generation"]
        assert g["n"] == sum(1 for x in gens if x.n_free)
        assert 0 <= g["min"] <= g["mean"] + 1e-12 and g["mean"] <= g["max"] + 1e-12 and g["max"] <= 1
        assert (g["sd"] is None) == (g["n"] < 2)
        assert 0 < row["mean_Z"] <= 1
        r = row["pearson_Z_collapsed"]
        assert r is None or -1 <= r <= 1


def test_the_cell_at_temperature_0_and_top_p_1_is_undefined():
    # issue 52: it printed 0.0% beside 100.0% at top_p 0.95 (two rules of the docs disagree there)
    from ministruct.diagnostics.collapse.report import cell_row

    class Gen:
        n_free = 3
        free = np.array([True, True, True])
        collapsed = np.array([[True, False]] * 3)
        nucleus_changed = np.zeros((3, 2), dtype=bool)
        top_changed = np.zeros(3, dtype=bool)
        Z = np.array([0.2, 0.5, 0.9])

    row = cell_row([Gen()], 1, schema="s", condition="shown", temperature=0.0, top_p=1.0)
    assert row["pooled_rate"] is None and row["per_generation"]["mean"] is None
    assert cell_row([Gen()], 0, schema="s", condition="shown", temperature=0.0, top_p=0.95)["pooled_rate"] == 1.0
