"""`--tools` on the real command: calls in OpenAI's shape that validate against their tool's
schema (checked with `jsonschema`, not our grammar), every choice mode, per-record tools and
tool_choice, tool_scores in the result, the trace and inspect; check and convert."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
EVERYDAY = "samples/tools/everyday.json"
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in json.loads((REPO / EVERYDAY).read_text())}


def validate_calls(tool_calls: list[dict], schemas: dict = SCHEMAS) -> None:
    for tc in tool_calls:
        assert tc["type"] == "function" and tc["id"].startswith("call_")
        fn = tc["function"]
        assert isinstance(fn["arguments"], str)
        jsonschema.validate(json.loads(fn["arguments"]), schemas[fn["name"]], format_checker=jsonschema.FormatChecker())


def assert_scores(rec: dict) -> None:
    (entry,) = rec["tool_scores"]
    assert entry["chosen"] == rec["tool_calls"][0]["function"]["name"]
    assert isinstance(entry["step"], int)
    assert all(0 <= s["p"] <= 1 for s in entry["scores"])
    assert sum(s["share"] for s in entry["scores"]) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.model
@pytest.mark.parametrize("parallel", ["1", "3"])
def test_a_batch_without_a_trace_scores_its_tools(run_cli, parallel):
    lines = [
        {"id": "a", "prompt": "What is the weather in Oslo right now?"},
        {"id": "b", "prompt": "What is 17 times 23?", "tool_choice": "calculator"},
        {"id": "c", "prompt": "Email bob@example.com that I am late."},
    ]
    p = run_cli(
        "gen", "--input", "-", "--tools", EVERYDAY, "--tool-choice", "required", "--max-tokens", "96",
        "--temperature", "0", "--no-progress", "--parallel", parallel,
        input="\n".join(json.dumps(x) for x in lines) + "\n",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["id"] for r in recs] == ["a", "b", "c"]
    for r in recs:
        validate_calls(r["tool_calls"])
        assert_scores(r)


@pytest.mark.model
def test_every_choice_mode_in_one_batch(run_cli, tmp_path):
    own = [{"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 3}},
        "required": ["n"], "additionalProperties": False}}}]  # fmt: skip
    lines = [
        {"id": "req", "prompt": "What is the weather in Paris right now?"},
        {"id": "named", "prompt": "What is 17 times 23?", "tool_choice": "calculator"},
        {"id": "openai-named", "prompt": "Search for pizza.", "tool_choice": {"type": "function", "function": {"name": "web_search"}}},
        {"id": "none", "prompt": "Say hello.", "tool_choice": "none", "max_tokens": 6},
        {"id": "auto", "prompt": "Find news about Mars.", "tool_choice": "auto", "max_tokens": 40},
        {"id": "own", "prompt": "Pick a number from 1 to 3.", "tools": own, "tool_choice": "required"},
        {"id": "bad", "prompt": "x", "tool_choice": "teleport"},
    ]  # fmt: skip
    trace = tmp_path / "t.jsonl"
    p = run_cli(
        "gen", "--input", "-", "--tools", EVERYDAY, "--tool-choice", "required", "--max-tokens", "48",
        "--temperature", "0", "--no-progress", "--trace", str(trace),
        input="\n".join(json.dumps(x) for x in lines) + "\n",
    )  # fmt: skip
    assert p.returncode == 1, p.stderr  # the bad record
    recs = {r["id"]: r for r in map(json.loads, p.stdout.splitlines())}
    for rid in ("req", "named", "openai-named"):
        r = recs[rid]
        assert r["complete"] and r["content"] is None and len(r["tool_calls"]) == 1, r
        validate_calls(r["tool_calls"])
        assert_scores(r)
    assert recs["named"]["tool_calls"][0]["function"]["name"] == "calculator"
    assert recs["openai-named"]["tool_calls"][0]["function"]["name"] == "web_search"
    assert [s["name"] for s in recs["named"]["tool_scores"][0]["scores"]] == ["calculator"]
    assert recs["none"]["tool_calls"] == [] and recs["none"]["content"] == recs["none"]["output"]
    auto = recs["auto"]
    assert auto["complete"]
    if auto["tool_calls"]:
        validate_calls(auto["tool_calls"])
    else:
        assert auto["content"] == auto["output"] and not auto["output"].startswith("{")
    own_call = recs["own"]["tool_calls"]
    validate_calls(own_call, {"pick": own[0]["function"]["parameters"]})
    assert "tool_choice 'teleport'" in recs["bad"]["error"]
    summaries = [r for r in map(json.loads, trace.read_text().splitlines()) if r["type"] == "summary"]
    first = next(s for s in summaries if s["id"] == "req")
    assert first["tool_scores"] == recs["req"]["tool_scores"]
    header = next(r for r in map(json.loads, trace.read_text().splitlines()) if r["type"] == "header")
    assert header["constraint"]["kind"] == "tools" and header["constraint"]["tool_choice"] == "required"


@pytest.mark.model
def test_inspect_shows_the_tool_choice(run_cli):
    args = ("inspect", "What is the weather in Oslo?", "--tools", EVERYDAY, "--tool-choice", "required")
    p = run_cli(*args, "--max-tokens", "40", "--temperature", "0", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)["result"]
    validate_calls(result["tool_calls"])
    assert_scores(result)
    p = run_cli(*args, "--max-tokens", "40", "--temperature", "0", "--no-progress", "--width", "120")
    assert p.returncode == 0, p.stderr
    assert "tool choice" in p.stdout and "get_weather_forecast" in p.stdout


def call(name: str, args: dict) -> str:
    return json.dumps({"name": name, "arguments": args})


def test_check_validates_each_call_against_its_tool(run_cli):
    ok = call("get_weather_forecast", {"days": 3, "city": "Rome"})  # any key order
    p = run_cli("check", "--tools", EVERYDAY, "--tool-choice", "required", ok)
    assert p.returncode == 0, p.stderr
    p = run_cli("check", "--tools", EVERYDAY, call("get_weather_forecast", {"city": "Rome", "days": 30}))
    assert p.returncode == 1
    assert "/tool_calls/0/function/arguments/days" in p.stdout and "maximum" in p.stdout
    p = run_cli("check", "--tools", EVERYDAY, "--tool-choice", "calculator", ok)
    assert p.returncode == 1 and "not allowed" in p.stdout
    p = run_cli("check", "--tools", EVERYDAY, "--as-generated", ok)  # not in the grammar's layout
    assert p.returncode == 1


def test_convert_prints_the_exact_grammar(run_cli):
    p = run_cli("convert", "--tools", EVERYDAY, "--tool-choice", "required", "--tool-format", "hermes", "--to", "gbnf")
    assert p.returncode == 0, p.stderr
    # each tool's call is one alternative: the markup with its name as a constant
    assert '"<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": "' in p.stdout
    assert '"<tool_call>\\n{\\"name\\": \\"get_weather_forecast\\", ' in p.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--regex", "a", "--tool-choice", "none"), "--tool-choice only applies to --tools"),
        (("--tools", EVERYDAY, "--tool-choice", "fly"), "--tool-choice 'fly' is not auto, required, none"),
        (("--tools", EVERYDAY, "--tool-format", "xml"), "--tool-format"),
        (("--tools", "samples/conj.json"), "at /: a tool list must be a non-empty JSON array"),
        (("--tools", "no/such.json"), "no/such.json: no such tools file"),
    ],
)
def test_bad_tool_flags_exit_2_naming_the_place(run_cli, args, needle):
    p = run_cli("convert", *args, "--to", "gbnf")
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_tool_choice_without_tools_says_it_needs_tools(run_cli):
    # issue 52: `gen --tool-choice required "hi"` said "give a constraint"
    p = run_cli("gen", "--tool-choice", "required", "hi")
    assert p.returncode == 2 and p.stderr.strip() == "ministruct: error: --tool-choice only applies to --tools"
