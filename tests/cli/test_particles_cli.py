"""`gen --particles`: the records' fields, the identity with today's sampler, hostile settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.conftest import assert_one_line_error

RAW = ("--quiet", "--no-progress")
QUESTION = "Is the sky blue? Answer yes or no."


@pytest.mark.parametrize(
    "flags,needles",
    [
        (("--particles", "0"), ("--particles", "[1, 64]")),
        (("--particles", "-3"), ("--particles",)),
        (("--particles", "100000000000000000000"), ("--particles",)),
        (("--particles", "8", "--ess", "0"), ("--ess", "(0, 1]")),
        (("--particles", "8", "--ess", "1.5"), ("--ess",)),
        (("--particles", "8", "--ess", "nan"), ("--ess",)),
        (("--particles", "8", "--ess", "-0.2"), ("--ess",)),
        (("--ess", "0.3"), ("--particles",)),
        (("--particles", "8", "--server", "http://127.0.0.1:9"), ("--particles", "servers")),
        (("--particles", "8", "--parallel", "4"), ("--parallel",)),
    ],
)
def test_hostile_particle_settings_are_one_line_and_exit_2(run_cli, flags, needles):
    p = run_cli("gen", QUESTION, "--choice", "yes", "--choice", "no", *flags, *RAW)
    assert_one_line_error(p, *needles)


@pytest.mark.model
def test_records_gain_the_particle_fields(run_cli):
    p = run_cli(
        "gen",
        QUESTION,
        "--choice",
        "yes",
        "--choice",
        "no",
        "--top-p",
        "1",
        "--particles",
        "4",
        "--format",
        "json",
        *RAW,
    )
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["output"] in ("yes", "no")
    assert rec["particle_method"] == "exact"
    assert 0 < rec["p_valid"] < 1 and rec["log_weight"] < 0 and rec["resamples"] == 0


@pytest.mark.model
def test_one_particle_writes_what_gen_writes_for_each_seed(run_cli):
    """--particles 1 draws today's tokens (the same output), and weighs them."""
    for seed in ("0", "1", "2"):
        args = ("gen", "Name a colour.", "--regex", "[a-z]{2,8}", "--seed", seed, "--format", "json", *RAW)
        plain = json.loads(run_cli(*args).stdout)
        one = json.loads(run_cli(*args, "--particles", "1").stdout)
        assert one["output"] == plain["output"] and one["stop_reason"] == plain["stop_reason"]
        assert one["particle_method"] == "smc" and one["resamples"] == 0
        assert 0 <= one["p_valid"] <= 1


@pytest.mark.model
def test_particles_run_records_of_a_batch_and_trace_their_weights(run_cli, tmp_path):
    data = '{"id": "a", "prompt": "Pick a number."}\n{"id": "b", "prompt": "Name a fruit."}\n'
    trace = tmp_path / "t.jsonl"
    p = run_cli(
        "gen", "--regex", "[a-z0-9]{1,6}", "--input", "-", "--particles", "3", "--no-end-weight", "--top-p", "1",
        "--trace", str(trace), *RAW, input=data,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["a", "b"]
    assert all(r["particle_method"] == "smc" and r["ess_min"] is not None for r in recs)
    steps = [json.loads(x) for x in trace.read_text().splitlines() if '"step"' in x]
    assert steps and all(len(s["particle_log_weights"]) == 3 for s in steps)


@pytest.mark.model
def test_records_with_their_own_choices_are_enumerated_each_for_its_own(run_cli):
    data = (
        '{"id": 1, "prompt": "Which is a fruit?", "choice": ["banana", "The potato"]}\n'
        '{"id": 2, "prompt": "Which is a fruit?", "choice": ["apple", "The rock"]}\n'
        '{"id": 3, "prompt": "Which is a fruit?", "choice": ["banana", "The potato"], "seed": 5}\n'
    )
    p = run_cli("gen", "--regex", "x", "--input", "-", "--particles", "4", "--top-p", "1", *RAW, input=data)
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert recs[0]["output"] in ("banana", "The potato") and recs[1]["output"] in ("apple", "The rock")
    assert all(r["particle_method"] == "exact" for r in recs)
    assert recs[0]["p_valid"] == recs[2]["p_valid"] != recs[1]["p_valid"]


@pytest.mark.model
def test_particles_think_first(run_cli):
    p = run_cli(
        "gen", "Pick a number between 1 and 9.", "--regex", "[1-9]", "--think", "--think-tokens", "8",
        "--particles", "3", "--top-p", "1", "--format", "json", *RAW,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["output"] in list("123456789") and rec["reasoning"] is not None
    assert rec["particle_method"] == "smc" and 0 < rec["p_valid"] <= 1


@pytest.mark.model
def test_particles_with_tools(run_cli):
    """--tools with --particles: the call is read back in OpenAI's shape and validates
    against its tool's schema; the record has the particle fields."""
    import jsonschema

    tools = json.loads((Path(__file__).resolve().parents[2] / "samples/tools/everyday.json").read_text())
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    p = run_cli(
        "gen", "What is the weather in Oslo?", "--tools", "samples/tools/everyday.json", "--tool-choice", "required",
        "--particles", "3", "--top-p", "1", "--max-tokens", "64", "--format", "json", *RAW,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["particle_method"] == "smc" and 0 <= rec["p_valid"] <= 1 and rec["ess_min"] is not None
    assert rec["tool_calls"]
    for call in rec["tool_calls"]:
        jsonschema.validate(json.loads(call["function"]["arguments"]), schemas[call["function"]["name"]])
