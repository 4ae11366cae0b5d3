"""`ministruct gen` end to end on the real bundled model."""

from __future__ import annotations

import json
import re

import pytest

from cli.conftest import assert_one_line_error

pytestmark = pytest.mark.model


def test_twenty_years_each_exactly_four_digits(run_cli):
    p = run_cli("gen", "--regex", "[0-9]{4}", "Pick a year between 1900 and 2000:", "--n", "20", "--seed", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 20
    assert all(re.fullmatch(r"[0-9]{4}", x) for x in lines), lines
    assert p.stderr == ""


def test_same_seed_same_output_and_seeds_differ(run_cli):
    args = ("gen", "--regex", "[a-z]{3,12}", "Name an animal:", "--n", "4", "--seed", "7", "--temperature", "1.0")
    a, b = run_cli(*args), run_cli(*args)
    assert a.returncode == 0 and a.stdout == b.stdout
    assert len(set(a.stdout.splitlines())) > 1


def test_jsonl_batch_keeps_order_and_reports_bad_records(run_cli):
    batch = (
        "\n".join(
            [
                json.dumps({"id": "a", "prompt": "Say yes or no:"}),
                json.dumps({"id": "b"}),
                "plain line prompt",
            ]
        )
        + "\n"
    )
    p = run_cli("gen", "--choice", "yes", "--choice", "no", "--input", "-", input=batch)
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["a", "b", 3]
    assert all(r["v"] == 1 for r in recs)
    assert recs[0]["output"] in ("yes", "no") and recs[0]["complete"] and recs[0]["error"] is None
    assert recs[0]["stop_reason"] in ("eos", "grammar_done")
    assert recs[1]["error"] and "prompt" in recs[1]["error"]
    assert recs[2]["output"] in ("yes", "no")
    assert recs[1]["stop_reason"] is None and recs[1]["prompt"] is None
    assert p.returncode == 1  # a failed record fails the batch (cli.md); it still ran


def test_cut_off_by_max_tokens_exits_1(run_cli):
    p = run_cli("gen", "--regex", "[a-z]{50}", "Write letters:", "--max-tokens", "3", "--format", "jsonl", "--hard-cut")
    rec = json.loads(p.stdout)
    assert rec["stop_reason"] == "max_tokens" and rec["complete"] is False and rec["n_tokens"] == 3
    assert p.returncode == 1
    # budget-aware (the default): 50 letters cannot fit in 3 tokens, said before generating
    refused = run_cli("gen", "--regex", "[a-z]{50}", "Write letters:", "--max-tokens", "3")
    assert refused.returncode == 1 and refused.stdout == "" and "too small" in refused.stderr


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--model", "/nonexistent/m.gguf"), ("/nonexistent/m.gguf",)),
        (("--top-p", "0"), ("--top-p",)),
        (("--top-p", "1.5"), ("--top-p",)),
        (("--temperature", "-1"), ("--temperature",)),
    ],
)
def test_bad_input_one_line_exit_2(run_cli, args, needles):
    assert_one_line_error(run_cli("gen", "--regex", "[0-9]", "x", *args), *needles)


def test_not_a_gguf_file(run_cli, tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"this is not a model")
    assert_one_line_error(run_cli("gen", "--regex", "[0-9]", "x", "--model", str(bad)), str(bad), "GGUF")


def test_invalid_regex(run_cli):
    p = run_cli("gen", "--regex", "[0-9", "x")
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.startswith("ministruct: error: <regex>:1:")


def test_what_is_said_while_the_model_loads_in_the_background_reaches_stderr(run_cli, tmp_path):
    """The weights load while the constraint is built (llama-cpp-python silences fds 1 and
    2 meanwhile): the constraint's warnings, and its errors, still reach stderr."""
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string", "format": "color-hex", "maxLength": 6}')
    p = run_cli("gen", "--schema", str(schema), "--lenient", "A word:", "--max-tokens", "8", "--temperature", "0")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout.strip()) and len(json.loads(p.stdout.strip())) <= 6
    assert p.stderr.startswith("ministruct: warning:") and "color-hex" in p.stderr
    schema.write_text('{"type": "object", "properties": {"a": {"type": "strin"}}}')
    bad = run_cli("gen", "--schema", str(schema), "x")
    assert_one_line_error(bad, "unknown type 'strin'")
    both = run_cli("gen", "--schema", str(schema), "x", "--model", str(tmp_path / "nope.gguf"))
    assert_one_line_error(both, "unknown type 'strin'")  # the constraint's error first, as before
