"""The collapse study's think arm on the real bundled model: every condition runs again
thinking first, on the same seeds, and only the answer's steps are counted."""

from __future__ import annotations

import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.grid import Grid, StudySettings
from ministruct.diagnostics.collapse.report import pairs_of
from ministruct.diagnostics.collapse.study import CollapseStudy
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.job import GenerationJob
from ministruct.jobs.think import ThinkSettings

pytestmark = pytest.mark.model

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["n"]}
REF = SamplingParams(temperature=0.7, top_p=0.9)


def test_think_arm_pairs_with_token_zero_and_counts_the_answer_only(model):
    c = Constraint.from_json_schema(SCHEMA)
    think = ThinkSettings(think_tokens=6)
    settings = StudySettings(seeds=(1, 2), grid=Grid((0.7,), (0.9,)), params=REF, max_tokens=40)
    report = CollapseStudy(model, [c], ["Pick a number."], settings, think=think).run()
    conds = {g.condition for g in report.generations}
    assert conds == {"shown", "withheld", "shown+think", "withheld+think"}
    for arm in ("shown", "withheld"):
        pairs = pairs_of(report.generations, arm, arm + "+think")
        assert [(a.seed, b.seed) for a, b in pairs] == [(1, 1), (2, 2)]
    assert len(pairs_of(report.generations)) == 2  # shown vs withheld ignores the think arm
    # the think arm's grid holds as many steps as an independent run's answer part
    job = GenerationJob(model, c, REF, max_tokens=40, fast_forward=False, budget_aware=False, think=think)
    job.show_schema = False
    dec = job.decoder("Pick a number.", seed=2)
    answer_steps = sum(step.phase == "answer" for step in dec.steps())
    (g,) = [g for g in report.generations if g.condition == "withheld+think" and g.seed == 2]
    assert len(g.Z) == answer_steps and g.complete
