"""`gen --no-fast-forward` and the fast-forward marks in traces and `inspect` (cli.md)."""

from __future__ import annotations

import json

import pytest

ARGS = (
    "gen",
    "Conjugate 'ser' in the present, 1st person.",
    "--schema",
    "samples/conj.json",
    "--seed",
    "4",
    "--max-tokens",
    "64",
    "--no-progress",
)


def trace_of(run_cli, tmp_path, *extra: str) -> tuple[list[dict], str]:
    path = tmp_path / "t.jsonl"
    p = run_cli(*ARGS, "--trace", str(path), *extra)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in path.read_text().splitlines()], p.stdout


@pytest.mark.model
def test_fast_forward_by_default_and_off_with_the_flag(run_cli, tmp_path):
    on, out_on = trace_of(run_cli, tmp_path)
    off, out_off = trace_of(run_cli, tmp_path, "--no-fast-forward")
    tags_on = [r["tag"] for r in on if r["type"] == "step"]
    tags_off = [r["tag"] for r in off if r["type"] == "step"]
    assert "fast_forward" in tags_on and set(tags_off) <= {"forced", "free"}
    assert on[-1]["fast_forward"] == tags_on.count("fast_forward") and off[-1]["fast_forward"] == 0
    assert on[-1]["sampled"] + on[-1]["fast_forward"] == on[-1]["steps"]
    # fewer model calls are not visible here, but fewer sampled steps are
    assert on[-1]["sampled"] < off[-1]["sampled"]
    for out in (out_on, out_off):
        value = json.loads(out)
        assert set(value) == {"verb", "tense", "person", "form"}


@pytest.mark.model
def test_inspect_marks_fast_forwarded_rows(run_cli):
    p = run_cli(
        "inspect",
        "Conjugate 'ir' in the future, 2nd person.",
        "--schema",
        "samples/conj.json",
        "--seed",
        "1",
        "--no-progress",
    )
    assert p.returncode == 0, p.stderr
    assert "» ff" in p.stdout and "fast-forwarded" in p.stdout
