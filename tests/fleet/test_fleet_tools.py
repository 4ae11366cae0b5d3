"""Tools over the fleet: each dialect's request, and real llama-cpp-python servers answering
them, every call verified against its tool's schema (and again here with `jsonschema`)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from fleet.conftest import REPO, records
from ministruct.decode.sampling import SamplingParams
from ministruct.fleet import Dialect, Settings, Verifier
from ministruct.fleet.dialects import parse_reply
from ministruct.grammar.constraint import load_constraint

EVERYDAY = str(REPO / "samples" / "tools" / "everyday.json")
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in json.loads(open(EVERYDAY).read())}
PROMPTS = ["What is 17 times 23?", "Weather in Oslo right now?", "Email bob@example.com that I am late."]


def tools_c(choice: str = "required"):
    return load_constraint(tools=EVERYDAY, tool_choice=choice)


def validate(tool_calls: list[dict]) -> None:
    assert tool_calls
    for tc in tool_calls:
        fn = tc["function"]
        jsonschema.validate(json.loads(fn["arguments"]), SCHEMAS[fn["name"]], format_checker=jsonschema.FormatChecker())


def test_llama_gets_the_compiled_grammar_and_the_functions_in_the_message():
    body = Dialect("llama", tools_c(), Settings(SamplingParams())).body("Weather?", seed=1)
    assert body["grammar"] == tools_c().grammar.to_gbnf() and "tools" not in body
    assert "get_weather_forecast" in body["messages"][-1]["content"]


@pytest.mark.parametrize("kind", ["vllm", "openai"])
def test_openai_style_servers_get_tools_and_tool_choice(kind):
    d = Dialect(kind, tools_c("calculator"), Settings(SamplingParams(), model="m"))
    body = d.body("What is 2+2?", seed=1)
    assert [t["function"]["name"] for t in body["tools"]] == list(SCHEMAS)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "calculator"}}
    assert body["parallel_tool_calls"] is False and d.field == "tools"
    assert body["messages"][-1]["content"] == "What is 2+2?"  # the server's template lists the tools
    assert "grammar" not in body and "structured_outputs" not in body and "response_format" not in body


def test_the_reply_s_tool_calls_are_verified_against_each_schema():
    v = Verifier(tools_c())
    ok = {"choices": [{"message": {"content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": '{"query": "x"}'}}]}}]}  # fmt: skip
    reply = parse_reply(ok, chat=True)
    assert reply.text == "" and v(reply.text, reply.tool_calls).ok
    bad = json.loads(json.dumps(ok))
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = '{"query": ""}'
    verdict = v("", parse_reply(bad, chat=True).tool_calls)
    assert not verdict.ok and verdict.position["pointer"] == "/tool_calls/0/function/arguments/query"
    assert not v("I would rather chat.").ok  # required, and no call


@pytest.mark.model
def test_llama_servers_answer_with_verified_calls(fleet_servers, run_cli):
    text = "".join(json.dumps({"id": f"r{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS))
    # a server cuts plainly at max_tokens (no budget-aware closing): room for an email's body.
    # compact: the walk this test was written on; in the default layout the bundled model's
    # `to` runs on ("bob.email.bob.m.m.m...") past 256 tokens, and the server cuts it
    args = ["gen", "--input", "-", "--tools", EVERYDAY, "--tool-choice", "required", "--max-tokens", "160"]
    args += ["--whitespace", "compact"]
    p = run_cli(
        *args, "--server-kind", "llama", "--server", fleet_servers[0].url, "--server", fleet_servers[1].url, input=text
    )
    assert p.returncode == 0, p.stderr + p.stdout
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == ["r0", "r1", "r2"]
    for r in recs:
        assert r["verified"] is True and len(r["tool_calls"]) == 1, r
        validate(r["tool_calls"])


@pytest.mark.model
def test_openai_style_tool_choice_on_llama_cpp_python(fleet_servers, run_cli):
    # llama-cpp-python's server honours a named tool_choice (it returns `tool_calls`) and
    # ignores "required" (it answers in text): the verifier tells them apart
    text = json.dumps({"id": "n", "prompt": PROMPTS[0]}) + "\n"
    base = ["gen", "--input", "-", "--tools", EVERYDAY, "--max-tokens", "48", "--server-kind", "vllm"]
    p = run_cli(*base, "--tool-choice", "calculator", "--server", fleet_servers[0].url, input=text)
    assert p.returncode == 0, p.stderr
    (r,) = records(p.stdout)
    assert r["verified"] is True and r["tool_calls"][0]["function"]["name"] == "calculator"
    validate(r["tool_calls"])
    p = run_cli(*base, "--tool-choice", "required", "--server", fleet_servers[0].url, input=text)
    assert p.returncode == 1
    (r,) = records(p.stdout)
    assert r["verified"] is False and r["tool_calls"] == []
    assert r["check_error"].startswith("/tool_calls") and r["check_position"]["pointer"] == "/tool_calls"


FAMILY_SAMPLES = ["qwen3_coder", "glm", "deepseek_v3_1", "deepseek_v3_2", "harmony", "gemma4", "kimi_k3", "minimax"]


@pytest.mark.parametrize("family", FAMILY_SAMPLES)
def test_llama_gets_each_familys_grammar_and_calls_are_verified_by_its_markup(family):
    from ministruct.grammar.export import llama_gbnf
    from ministruct.grammar.tool_families import FAMILIES
    from ministruct.grammar.tool_text import write_calls

    c = load_constraint(tools=EVERYDAY, tool_choice="required", tool_format=family)
    body = Dialect("llama", c, Settings(SamplingParams())).body("Weather?", seed=1)
    assert body["grammar"] == llama_gbnf(c.grammar)
    v = Verifier(c)
    good = write_calls(FAMILIES[family], [("get_weather", {"city": "Oslo"})])
    assert v(good).ok, good
    undeclared = write_calls(FAMILIES[family], [("get_weather", {"city": "Oslo", "days": 3})])
    verdict = v(undeclared)
    assert not verdict.ok and verdict.position["pointer"] == "/tool_calls/0/function/arguments", verdict


@pytest.mark.model
@pytest.mark.parametrize("template", ["Qwen3-Coder.jinja", "GLM-4.6.jinja"])
def test_llama_servers_answer_in_a_familys_markup_verified(fleet_servers, run_cli, template):
    suite = REPO.parent / "shared" / "suites" / "chat_templates"
    if not suite.exists():
        pytest.skip(f"the chat-template suite is not at {suite}")
    text = "".join(json.dumps({"id": f"r{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS))
    args = ["gen", "--input", "-", "--tools", EVERYDAY, "--tool-choice", "required", "--max-tokens", "200"]
    p = run_cli(
        *args,
        "--chat-template",
        str(suite / template),
        "--server-kind",
        "llama",
        "--server",
        fleet_servers[0].url,
        input=text,
    )
    assert p.returncode in (0, 1), p.stderr  # 1: some record unverified
    recs = records(p.stdout)
    # a server cuts plainly at max_tokens: a call cut short is reported unverified, naming the markup
    for r in recs:
        if r["stop_reason"] == "max_tokens":
            assert r["verified"] is False and "/tool_calls" in r["check_error"], r
            continue
        assert r["verified"] is True and len(r["tool_calls"]) == 1, r
        assert "<arg_key>" in r["output"] or "<parameter=" in r["output"]
        validate(r["tool_calls"])
    assert sum(r["verified"] is True for r in recs) >= 2, p.stdout
