"""tool_scores on hand-made steps over a hand-made vocabulary, against the chained mass
computed by hand (jobs/tool_scores.py's definition)."""

from __future__ import annotations

import numpy as np
import pytest

from ministruct.decode.loop import Step
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.tools import ReadCalls, Tool, ToolCall, ToolSpec
from ministruct.jobs.tool_scores import ToolScorer

TOKENS = [b'{"name": ', b'"', b'"calc', b"get", b"_weather", b"_forecast", b"calc", b"ulator", b"x"]
A, Q, QC, G, W, F, C, U, X = range(9)
VOCAB = Vocabulary.from_bytes(TOKENS + [b""], eog_ids=[9])
SPEC = ToolSpec([Tool(n, "", {}) for n in ("get_weather", "get_weather_forecast", "calculator")], "required")


def step(index: int, token: int, probs: dict[int, float]) -> Step:
    """A step that drew `token`, with these probabilities on legal tokens (the rest on `x`, not legal)."""
    p = np.zeros(VOCAB.n_logits)
    for t, v in probs.items():
        p[t] = v
    p[X] = 1.0 - sum(probs.values())
    with np.errstate(divide="ignore"):
        logits = np.log(p).astype(np.float32)
    mask = np.zeros(VOCAB.n_logits, dtype=bool)
    mask[list(probs)] = True
    return Step(index, token, TOKENS[token], logits, mask, 0.0)


def test_chained_mass_per_name():
    steps = [
        step(0, A, {A: 0.8}),  # ends before the name: not a factor
        step(1, Q, {Q: 0.5, QC: 0.2}),  # `"calc` reaches into the name
        step(2, G, {G: 0.6, C: 0.1}),  # the path leaves calculator here
        step(3, W, {W: 0.9}),
        step(4, Q, {Q: 0.4, F: 0.3}),  # finishes get_weather, leaves get_weather_forecast
    ]
    scorer = ToolScorer(SPEC, VOCAB)
    for s in steps:
        scorer.observe(s)
    output = b"".join(TOKENS[s.token_id] for s in steps)
    assert output == b'{"name": "get_weather"'
    (got,) = scorer.scores(ReadCalls(None, [ToolCall("get_weather", {}, 10)]), output)
    p = {s["name"]: s["p"] for s in got["scores"]}
    assert got["step"] == 1 and got["chosen"] == "get_weather"
    assert p["get_weather"] == pytest.approx(0.5 * 0.6 * 0.9 * 0.4, rel=1e-5)
    assert p["get_weather_forecast"] == pytest.approx(0.5 * 0.6 * 0.9 * 0.3, rel=1e-5)
    assert p["calculator"] == pytest.approx((0.5 + 0.2) * 0.1, rel=1e-5)
    total = sum(p.values())
    for s in got["scores"]:
        assert s["share"] == pytest.approx(s["p"] / total, rel=1e-4)


def test_a_name_written_in_one_token_with_its_quote():
    steps = [step(0, A, {A: 1.0}), step(1, QC, {Q: 0.25, QC: 0.5}), step(2, U, {U: 0.5})]
    scorer = ToolScorer(SPEC, VOCAB)
    for s in steps:
        scorer.observe(s)
    output = b"".join(TOKENS[s.token_id] for s in steps)
    (got,) = scorer.scores(ReadCalls(None, [ToolCall("calculator", {}, 10)]), output)
    p = {s["name"]: s["p"] for s in got["scores"]}
    # calculator: (all of step 1, both tokens fit) * 0.5; the others only through `"` at step 1
    assert p["calculator"] == pytest.approx(0.75 * 0.5, rel=1e-5)
    assert p["get_weather"] == pytest.approx(0.25, rel=1e-5) == p["get_weather_forecast"]
