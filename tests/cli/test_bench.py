"""`ministruct bench` end to end (the --json object is a contract: cli.md)."""

from __future__ import annotations

import json

import pytest

from cli.conftest import assert_one_line_error

KEYS = [
    "v",
    "model",
    "n_vocab",
    "constraint",
    "steps",
    "compile_ms",
    "mask_us",
    "tokens_per_s",
    "ff_share",
    "first_mask_ms",
    "peak_rss_mb",
    "vocab_ms",
    "kernel_ms",
    "import_ms",
    "cold_mask_us",
    "first_steps_us",
    "warm_mask_us",
    "ttft_ms",
]


@pytest.mark.model
def test_json_masks_only_has_exactly_the_contract_keys(run_cli):
    p = run_cli("bench", "--regex", "[0-9]{4}", "--steps", "30", "--no-generate", "--json", "--seed", "3")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1
    r = json.loads(lines[0])
    assert list(r) == KEYS
    assert r["v"] == 1 and r["n_vocab"] == 49152 and r["steps"] == 30
    assert r["model"].endswith(".gguf")
    assert r["constraint"]["kind"] == "regex" and r["constraint"]["text"] == "[0-9]{4}"
    assert set(r["mask_us"]) == {"mean", "p50", "p99", "max"}
    m = r["mask_us"]
    assert 0 <= m["p50"] <= m["p99"] <= m["max"] and m["mean"] <= m["max"]
    assert r["tokens_per_s"] is None and r["ff_share"] is None
    assert r["compile_ms"] > 0 and r["peak_rss_mb"] > 10
    assert r["first_mask_ms"] >= r["compile_ms"]
    assert r["cold_mask_us"] == r["mask_us"] and set(r["warm_mask_us"]) == set(m)
    assert len(r["first_steps_us"]) == 10 and max(r["first_steps_us"]) <= m["max"]
    assert r["vocab_ms"] > 0 and r["kernel_ms"] >= 0 and r["import_ms"] >= 0 and r["ttft_ms"] is None


@pytest.mark.model
def test_json_with_generation_reports_both_rates(run_cli):
    p = run_cli("bench", "--choice", "yes", "--choice", "no", "--steps", "10", "--max-tokens", "8", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert list(r) == KEYS
    tps = r["tokens_per_s"]
    assert set(tps) == {"constrained", "unconstrained", "fast_forward"}
    assert tps["unconstrained"] > 0 and tps["constrained"] >= 0 and tps["fast_forward"] >= 0
    assert 0 <= r["ff_share"] <= 1
    assert r["ttft_ms"] > 0


@pytest.mark.model
def test_json_ff_share_of_a_dictated_output(run_cli):
    """A constraint with output the grammar dictates whole: every output token is fast-forwarded."""
    p = run_cli(
        "bench",
        "--regex",
        '\\{"name": "ministruct", "kind": "library"\\}',
        "--steps",
        "5",
        "--max-tokens",
        "64",
        "--json",
    )
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["ff_share"] == 1.0
    assert r["tokens_per_s"]["fast_forward"] > 0


@pytest.mark.model
def test_table_output_names_the_numbers(run_cli):
    p = run_cli("bench", "--grammar", "arithmetic", "--steps", "20", "--no-generate")
    assert p.returncode == 0, p.stderr
    for word in ("compile", "mask", "p99", "first mask ready", "peak RSS", "--no-generate"):
        assert word in p.stdout, (word, p.stdout)


def test_no_constraint_is_a_usage_error(run_cli):
    assert_one_line_error(run_cli("bench", "--no-generate", "--json"), "constraint")


def test_bad_steps_is_a_usage_error(run_cli):
    p = run_cli("bench", "--regex", "a", "--steps", "0", "--no-generate")
    assert p.returncode == 2 and p.stdout == ""
