"""Hostile input never ends a batch or crashes a command (issue 29): lone surrogates,
non-UTF-8 lines, a --resume file cut mid-line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.conftest import assert_one_line_error

RAW = ("--raw", "--quiet", "--no-progress")


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


@pytest.mark.model
def test_a_lone_surrogate_in_a_jsonl_prompt_is_an_error_record_and_the_batch_goes_on(run_cli):
    data = '{"id":"a","prompt":"x"}\n{"id":"b","prompt":"a\\ud800b"}\n{"id":"c","prompt":"x"}\n'
    p = run_cli("gen", "--regex", "[0-9]", "--input", "-", *RAW, input=data)
    assert p.returncode == 1, p.stderr
    assert "internal error" not in p.stderr
    out = _lines(p.stdout)
    assert [r["id"] for r in out] == ["a", "b", "c"]
    assert out[0]["error"] is None and out[2]["error"] is None
    assert "<stdin>:2" in out[1]["error"] and "surrogate" in out[1]["error"] and "U+D800" in out[1]["error"]
    assert out[1]["prompt"] == "a\ud800b"  # written back as the escape it came as
    assert "\\ud800" in p.stdout.splitlines()[1]


@pytest.mark.model
def test_a_schema_enum_with_a_lone_surrogate_runs_under_the_shown_schema(run_cli, tmp_path: Path):
    s = tmp_path / "s.json"
    s.write_text('{"enum": ["\\ud800", "a"]}')
    p = run_cli("gen", "--schema", str(s), "--max-tokens", "8", "--seed", "1", "Pick one.", *RAW)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) in ("\ud800", "a")


def test_a_lone_surrogate_in_an_enum_is_written_as_its_escape(run_cli, tmp_path: Path):
    s = tmp_path / "s.json"
    s.write_text('{"enum": ["\\ud800"]}')
    p = run_cli("convert", "--schema", str(s), "--to", "gbnf")
    assert p.returncode == 0, p.stderr
    assert '"\\"\\\\u" [Dd] [8] [0] [0] "\\""' in p.stdout  # the escape, no raw surrogate class
    for how in ((), ("--as-generated",)):
        ok = run_cli("check", "--schema", str(s), *how, '"\\ud800"')
        assert ok.returncode == 0, ok.stderr


@pytest.mark.model
def test_a_command_line_prompt_that_is_not_utf8_is_one_error_line(run_cli):
    import os
    import subprocess
    import sys

    from cli.conftest import REPO

    p = subprocess.run(
        [sys.executable, "-m", "ministruct", "gen", "--regex", "[0-9]", os.fsdecode(b"\xff\xfe"), *RAW],
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    proc = subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(), p.stderr.decode())
    assert_one_line_error(proc, "prompt", "UTF-8", "0xff")


def test_resume_after_a_cut_off_last_line_drops_it_and_writes_each_record_once(run_cli, tmp_path: Path):
    # issue 52: the cut line stayed in the middle of the file (after a full disk, or a kill)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": f"r{i}", "text": "yes"}) + "\n" for i in range(3)))
    out = tmp_path / "out.jsonl"
    full = run_cli("check", "--choice", "yes", "--input", str(inp), "--format", "jsonl").stdout.splitlines()
    out.write_text(full[0] + "\n" + full[1][:20])  # killed while writing r1
    import subprocess
    import sys

    from cli.conftest import REPO

    args = [sys.executable, "-m", "ministruct", "check", "--choice", "yes", "--input", str(inp)]
    with open(out, "a") as f:  # `>> out.jsonl`
        p = subprocess.run(
            [*args, "--format", "jsonl", "--resume", str(out)], stdout=f, stderr=subprocess.PIPE, cwd=REPO
        )
    assert p.returncode == 0, p.stderr
    assert out.read_text().splitlines() == full  # every record once, in order, whole
