"""`ministruct inspect` end to end on the bundled model (subprocess, as users run it)."""

from __future__ import annotations

import json
import re

import pytest

from cli.conftest import assert_one_line_error

pytestmark = pytest.mark.model


def _json(proc):
    assert proc.stdout.count("\n") == 1, proc.stdout[:500]
    obj = json.loads(proc.stdout)
    assert obj["v"] == 1
    return obj


def test_grammar_report_tables(run_cli):
    p = run_cli("inspect", "--regex", "[0-9]{4}", "--no-progress")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for needle in (
        "grammar",
        "canonical GBNF",
        "root ::=",
        "NFA states",
        "legal-set sizes",
        "sample strings",
        "tokenizer",
    ):
        assert needle in out, needle
    assert max(len(line) for line in out.splitlines()) <= 100  # COLUMNS=100 from conftest


def test_grammar_report_json_against_the_vocabulary(run_cli, vocab):
    from ministruct.grammar.regex.parse import parse_regex

    p = run_cli("inspect", "--regex", "[0-9]{4}", "--json", "--walks", "4", "--seed", "5")
    assert p.returncode == 0, p.stderr
    obj = _json(p)
    g = obj["grammar"]
    assert g["gbnf"] == parse_regex("[0-9]{4}").to_gbnf()
    assert g["stats"]["nfa_states"] > 0 and g["rules"] >= 1
    assert len(g["samples"]) == 4
    for s in g["samples"]:
        assert s["complete"] and re.fullmatch(r"[0-9]{4}", s["text"]), s
    # |L| per configuration, independently: digit-only tokens that fit, or EOG at the end
    digits = [t for t in vocab.tokens if t and t.isdigit() and t.isascii()]
    expected = {sum(len(t) <= room for t in digits) for room in (1, 2, 3, 4)} | {len(vocab.eog_ids)}
    sizes = g["legal_sizes"]
    assert sizes["min"] == min(expected) and sizes["max"] == max(expected)
    assert sum(sizes["histogram"].values()) == sizes["configurations"] >= 2
    tok = obj["tokenizer"]
    assert tok["n_tokens"] == vocab.n_tokens and tok["n_logits"] == vocab.n_logits
    invalid = 0
    for i, t in enumerate(vocab.tokens):
        if t and i not in vocab.control_ids:
            try:
                t.decode("utf-8")
            except UnicodeDecodeError:
                invalid += 1
    assert tok["invalid_utf8"] == invalid


def test_same_seed_same_walks(run_cli):
    args = ("inspect", "--regex", "[a-z]{2,6}", "--json", "--seed", "3")
    a, b = _json(run_cli(*args)), _json(run_cli(*args))
    assert a["grammar"]["samples"] == b["grammar"]["samples"]
    c = _json(run_cli("inspect", "--regex", "[a-z]{2,6}", "--json", "--seed", "4"))
    assert c["grammar"]["samples"] != a["grammar"]["samples"]


def test_generation_table_and_summary(run_cli):
    p = run_cli(
        "inspect",
        "Is the sky blue? Answer yes or no.",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--width",
        "90",
        "--no-progress",
    )
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "|L|" in out and "masked" in out and "tag" in out
    assert "summary" in out and "collapsed" in out and "total KL" in out
    assert max(len(line) for line in out.splitlines()) <= 90


def test_generation_json_is_consistent(run_cli):
    p = run_cli(
        "inspect",
        "Is the sky blue? Answer yes or no.",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--json",
        "--temperature",
        "1.0",
        "--top-p",
        "0.9",
        "--seed",
        "2",
    )
    assert p.returncode == 0, p.stderr
    obj = _json(p)
    steps, summary, result = obj["steps"], obj["summary"], obj["result"]
    assert obj["header"]["type"] == "header" and obj["header"]["sampling"]["seed"] == 2
    assert result["output"] in ("yes", "no") and result["complete"]
    assert summary["steps"] == len(steps) >= 1
    assert summary["forced"] + summary["free"] == summary["sampled"]
    assert summary["sampled"] + summary["fast_forward"] == summary["steps"]
    assert "".join(s["token"] for s in steps if not s.get("control")) == result["output"]
    for s in steps:
        assert 0 < s["Z"] <= 1
        if s["tag"] == "forced":
            assert s["nucleus_masked"] == 1 and not s["collapsed"]
    rt = obj["round_trip"]
    assert rt["generated"] == [s["token_id"] for s in steps if not s.get("control")]
    assert rt["same_bytes"]


def test_needs_a_constraint(run_cli):
    assert_one_line_error(run_cli("inspect"), "constraint")


def test_a_pipe_gets_the_step_table_as_tsv(run_cli):
    # issue 29: piped, the table was Rich's at 80 columns, every cell folded
    p = run_cli("inspect", "A number:", "--regex", "[0-9]{2}", "--no-progress", env={"COLUMNS": ""})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split("\t")[:5] == ["step", "token", "token_id", "legal_count", "Z"]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) >= 2 and all(len(r) == len(lines[0].split("\t")) for r in rows)
    assert "".join(r[1] for r in rows).isdigit()
