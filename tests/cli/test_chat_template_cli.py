"""`--chat-template FILE` and `--tool-format auto` on the real command: the family the template
writes is detected and used (check and convert load no model), a template without tool
markup falls back to json with a warning, a template whose calls no family reads is refused
(exit 2); the think preset comes from the template. With the bundled model and the
templates of three families, ten everyday prompts with --tool-choice required give calls
that parse and validate against the tool's schema (`jsonschema`)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO.parent / "shared" / "suites" / "chat_templates"
EVERYDAY = "samples/tools/everyday.json"
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in json.loads((REPO / EVERYDAY).read_text())}

pytestmark = pytest.mark.skipif(not SUITE.exists(), reason=f"the chat-template suite is not at {SUITE}")


def template(name: str) -> str:
    return str(SUITE / name)


def test_convert_uses_the_family_the_template_writes(run_cli):
    r = run_cli(
        "convert", "--tools", EVERYDAY, "--tool-choice", "required", "--chat-template", template("Qwen3-Coder.jinja")
    )
    assert r.returncode == 0, r.stderr
    assert '"<tool_call>\\n<function=get_weather>\\n<parameter=city>\\n"' in r.stdout


def test_check_reads_the_templates_markup(run_cli):
    glm = ["--tools", EVERYDAY, "--tool-choice", "required", "--chat-template", template("GLM-4.6.jinja")]
    good = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"
    r = run_cli("check", good, *glm)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
    extra = good.replace("</tool_call>", "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
    r = run_cli("check", extra, *glm)
    assert r.returncode == 1 and "days" in r.stdout, r.stdout


def test_a_template_without_tool_markup_gets_json_with_a_warning(run_cli, tmp_path):
    plain = tmp_path / "plain.jinja"
    plain.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    r = run_cli("convert", "--tools", EVERYDAY, "--tool-choice", "required", "--chat-template", str(plain))
    assert r.returncode == 0
    assert "writes no tool calls" in r.stderr and '{\\"name\\": ' in r.stdout


def test_a_template_with_unreadable_tool_markup_is_refused(run_cli, tmp_path):
    odd = tmp_path / "odd.jinja"
    odd.write_text(
        "{% for m in messages %}{{ m.content }}{% for tc in m.tool_calls or [] %}"
        "<<CALL {{ tc.function.name }} {{ tc.function.arguments | tojson }}>>{% endfor %}{% endfor %}"
    )
    r = run_cli("convert", "--tools", EVERYDAY, "--chat-template", str(odd))
    assert r.returncode == 2
    assert "--tool-format" in r.stderr and "cannot be read" in r.stderr


def test_the_think_preset_comes_from_the_template(run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    seed = ["--schema", str(schema), "--think", "--chat-template", template("ByteDance-Seed-OSS.jinja")]
    r = run_cli("check", '<seed:think>so a is 1</seed:think>{"a": 1}', *seed)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli("check", '<think>so a is 1</think>{"a": 1}', *seed)
    assert r.returncode == 1


PROMPTS = [
    "What is the weather in Oslo right now?",
    "Will it rain in Paris over the next 3 days?",
    "What is 17 times 23?",
    "Search the web for the best pizza in Naples.",
    "Email bob@example.com that I will be late.",
    "Put a dentist appointment on 2026-03-14 at 09:30 in my calendar.",
    "How hot is it in Cairo today, in celsius?",
    "Compute (12 + 30) / 7.",
    "Find recent news about the Mars rover.",
    "Give me the 5-day forecast for Tokyo.",
]


@pytest.mark.model
@pytest.mark.parametrize(
    "name,family",
    [
        ("Qwen3-Coder.jinja", "qwen3_coder"),
        ("GLM-4.6.jinja", "glm"),
        ("deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v3_1"),
    ],
)
def test_the_bundled_model_calls_tools_in_three_families_markup(run_cli, tmp_path, name, family):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(PROMPTS)))
    r = run_cli(
        "gen",
        "--input",
        str(prompts),
        "--tools",
        EVERYDAY,
        "--tool-choice",
        "required",
        "--chat-template",
        template(name),
        "--max-tokens",
        "200",
        "--verbose",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    assert f"tool format: {family}" in r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(records) == len(PROMPTS)
    for rec in records:
        assert rec["complete"] and rec["error"] is None, rec
        assert len(rec["tool_calls"]) == 1, rec
        fn = rec["tool_calls"][0]["function"]
        jsonschema.validate(json.loads(fn["arguments"]), SCHEMAS[fn["name"]], format_checker=jsonschema.FormatChecker())
        if family != "deepseek_v3_1":
            assert "{" not in rec["output"].split(fn["name"])[1][:2]  # the family's own markup, not JSON
