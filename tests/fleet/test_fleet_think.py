"""Think first on real llama-cpp-python servers: the whole grammar goes out as GBNF (the
thinking bounded in length, since a server's grammar cannot count tokens), the fleet
verifies the answer after the closing tag with ministruct's own check."""

from __future__ import annotations

import json

import pytest

from fleet.conftest import records
from fleet.test_fleet_servers import servers_args
from ministruct.check.instance import InstanceChecker

pytestmark = pytest.mark.model

SCHEMA = {  # bounded: a server has no budget-aware closing for a number that goes on and on
    "type": "object",
    "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 999}},
    "required": ["answer"],
}
QUESTIONS = [f"What is {a} plus {b}?" for a, b in zip(range(2, 12), range(7, 17))]


def test_ten_prompts_think_first_all_answers_verified(fleet_servers, run_cli, tmp_path):
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(SCHEMA))
    lines = "".join(json.dumps({"id": f"q{i}", "prompt": q}) + "\n" for i, q in enumerate(QUESTIONS))
    p = run_cli(
        "gen", "--input", "-", "--schema", str(schema), "--think", "--think-tokens", "48", "--max-tokens", "220",
        "--server-kind", "llama", *servers_args(fleet_servers), input=lines,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == [f"q{i}" for i in range(10)]
    check = InstanceChecker(SCHEMA)
    for r in recs:
        assert r["verified"] is True and r["complete"] is True, r
        assert "reasoning" in r and "</think>" not in r["output"], r
        assert check.check(r["output"]).accepted and r["json"] == json.loads(r["output"]), r
        assert len(r["reasoning"]) <= 3 * 48, r  # the grammar bounds the thinking in code points


def test_openai_kind_refuses_free_text_first(run_cli, tmp_path):
    schema = tmp_path / "answer.json"
    schema.write_text(json.dumps(SCHEMA))
    p = run_cli(
        "gen", "hi", "--schema", str(schema), "--think", "--server", "http://127.0.0.1:9", "--server-kind", "openai",
        "--model", "m",
    )  # fmt: skip
    assert p.returncode == 2 and "openai" in p.stderr and "--think" in p.stderr, p.stderr
