"""A record's own settings on the fleet as on the local model (issue 52): the same mixed
batch (its own constraints, think and think_tokens, sampling, max_tokens, system, tools,
records in error) run by `gen --input` locally and with `--server` on real
llama-cpp-python servers; per record, the same fields, each output satisfying the
record's own constraint."""

from __future__ import annotations

import json
import re

import pytest

from fleet.conftest import records
from fleet.test_fleet_servers import servers_args

pytestmark = pytest.mark.model

ASK = "Record {i}. Pick a number:"
WEATHER = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"enum": ["Oslo", "Rome"]}}, "required": ["city"]}}]  # fmt: skip
ROWS = [
    {"id": "plain"},
    {"id": "think", "think": True, "think_tokens": 8},
    {"id": "think-tokens-only", "think_tokens": 4},
    {"id": "no-think", "think": False},
    {"id": "letters-think", "regex": "[a-z]{3}", "think": True, "think_tokens": 6, "seed": 5},
    {"id": "yn", "choice": ["yes", "no"], "temperature": 0.3, "top_p": 0.8, "max_tokens": 6},
    {"id": "system", "system": "You answer with one number."},
    {"id": "tools", "tools": WEATHER, "tool_choice": "required", "max_tokens": 40},
    {"id": "bad-schema", "schema": "/nonexistent/x.json"},
    {"id": "bad-think-tokens", "think": True, "think_tokens": -1},
]
# (the record's constraint where it has one, else the command's)
OWN = {"letters-think": "[a-z]{3}", "yn": "yes|no"}
FIELDS = ("reasoning", "think_end", "think_tokens", "json", "tool_calls", "content")


def _batch(tmp_path) -> str:
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps({**row, "prompt": ASK.format(i=i)}) + "\n" for i, row in enumerate(ROWS)))
    return str(path)


def test_a_mixed_batch_has_the_same_fields_per_record_locally_and_on_servers(fleet_servers, run_cli, tmp_path):
    # issue 52: a record's own think / think_tokens was sent to servers without the
    # thinking grammar (no reasoning, the output as without think)
    inp = _batch(tmp_path)
    args = ("gen", "--input", inp, "--regex", "[0-9]{2}", "--max-tokens", "48", "--raw", "--quiet", "--no-progress")
    local = run_cli(*args)
    fleet = run_cli(*args, "--server-kind", "llama", *servers_args(fleet_servers))
    assert local.returncode == fleet.returncode == 1, (local.stderr, fleet.stderr)  # (the two bad records)
    here, there = records(local.stdout), records(fleet.stdout)
    assert [r["id"] for r in here] == [r["id"] for r in there] == [row["id"] for row in ROWS]
    for a, b in zip(here, there):
        assert a["error"] == b["error"], (a, b)
        assert [k in a for k in FIELDS] == [k in b for k in FIELDS], (a, b)
        if a["error"] is not None:
            continue
        thinks = a["id"] in ("think", "think-tokens-only", "letters-think")
        assert ("reasoning" in a) == thinks, a
        for r in (a, b):
            if a["id"] == "tools":
                assert [c["function"]["name"] for c in r["tool_calls"]] == ["get_weather"], r
                continue
            pattern = OWN.get(a["id"], "[0-9]{2}")
            if r["complete"]:
                assert re.fullmatch(pattern, r["output"]), r
            if thinks:
                assert "</think>" not in r["output"] and isinstance(r["reasoning"], str), r
    errors = {r["id"]: r["error"] for r in here if r["error"] is not None}
    assert set(errors) == {"bad-schema", "bad-think-tokens"}
    assert "think_tokens" in errors["bad-think-tokens"]


def test_a_think_record_on_servers_sends_the_thinking_grammar(fleet_servers, run_cli):
    """The record's thinking is bounded by its own think_tokens (3 code points a token in
    the grammar a server gets), and the answer after CLOSE is checked."""
    rows = [{"id": f"t{i}", "prompt": ASK.format(i=i), "think": True, "think_tokens": 5} for i in range(4)]
    p = run_cli(
        "gen", "--input", "-", "--regex", "[0-9]{2}", "--max-tokens", "40", "--raw", "--server-kind", "llama",
        *servers_args(fleet_servers), input="".join(json.dumps(r) + "\n" for r in rows),
    )  # fmt: skip
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == ["t0", "t1", "t2", "t3"], p.stderr
    for r in recs:
        assert "reasoning" in r and len(r["reasoning"]) <= 15, r
        if r["verified"]:
            assert re.fullmatch("[0-9]{2}", r["output"]), r
    assert any(r["verified"] for r in recs), recs


def test_the_command_think_grammar_and_a_record_think_tokens_is_refused_for_that_record(
    fleet_servers, run_cli, tmp_path
):
    free = tmp_path / "free.gbnf"
    free.write_text("root ::= [a-z ]{1,20}\n")
    rows = [{"id": "a", "prompt": ASK.format(i=0)}, {"id": "b", "prompt": ASK.format(i=1), "think_tokens": 4}]
    p = run_cli(
        "gen", "--input", "-", "--regex", "[0-9]{2}", "--max-tokens", "40", "--raw", "--think", "--think-grammar",
        str(free), "--server-kind", "llama", *servers_args(fleet_servers), input="".join(json.dumps(r) + "\n" for r in rows),
    )  # fmt: skip
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == ["a", "b"], p.stderr
    assert recs[0]["error"] is None and "reasoning" in recs[0]
    assert recs[1]["error"].startswith("<stdin>:2: ") and "think_tokens" in recs[1]["error"], recs[1]
