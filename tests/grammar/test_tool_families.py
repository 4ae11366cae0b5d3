"""Every family's grammar against the templates that define it: each template of the suite
(../shared/suites/chat_templates) that renders calls is rendered here with jinja2, from the
template file, as formats.json says; the calls' markup it writes (one call, two calls) must
be in the language of ministruct's grammar for the family detected from that template, and
read back to the same names and arguments. The same template's rendering of a wrong call
(a tool that is not declared, a required parameter missing, an undeclared one) and a
broken envelope must be outside it."""

from __future__ import annotations

import jinja2
import pytest

from grammar.chat_templates import WEATHER, calls_span, formats, render, template_names, template_text
from ministruct.check.grammar import check_text
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.tool_families import FAMILIES, detect_family, think_of_template
from ministruct.grammar.tools import format_for_template, read_calls

EXPECTED = {
    "Qwen-Qwen3-0.6B.jinja": "hermes",
    "Qwen3-Coder.jinja": "qwen3_coder",
    "Qwen3.5-4B.jinja": "qwen3_coder",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "openai-gpt-oss-120b.jinja": "harmony",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v3_1",
    "DeepSeek-V3.2.jinja": "deepseek_v3_2",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1",
    "moonshotai-Kimi-K2.jinja": None,  # declares tools, never renders a call: json, with a warning
    "moonshotai-Kimi-K2-Thinking.jinja": "kimi_k2",
    "Kimi-K3.jinja": "kimi_k3",
    "glm_4_5.jinja": "glm",
    "GLM-4.6.jinja": "glm",
    "unsloth-MiniMax-M2.jinja": "minimax",
    "mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja": "mistral",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_r7b",
    "llama-cpp-microsoft-Phi-4-mini-instruct.jinja": "phi4_mini",
    "gemma4.jinja": "gemma4",
    "NVIDIA-Nemotron-Nano-v2.jinja": "nemotron",
    "nvidia-Llama-3_3-Nemotron-Super-49B-v1_5.jinja": "nemotron",
    "ByteDance-Seed-OSS.jinja": "seed_oss",
    "unsloth-Apriel-1.5.jinja": "apriel",
    "llama-cpp-lfm2.jinja": "lfm2",
    "LFM2.5-8B-A1B.jinja": "lfm2_pythonic",
}
PARIS, LONDON = ("get_weather", {"city": "Paris"}), ("get_weather", {"city": "London"})
RENDERING = [n for n in template_names() if EXPECTED.get(n)]


def family_of(name: str):
    fam = detect_family(template_text(name)).family
    assert fam is not None
    return fam


def grammar(name: str, parallel: bool, tools=(WEATHER,)) -> Constraint:
    return Constraint.from_tools(list(tools), choice="required", parallel=parallel, format=family_of(name).name)


def rendered_span(name: str, calls) -> str:
    try:
        text = render(name, calls, [WEATHER])
    except jinja2.TemplateError as e:
        pytest.skip(f"{name} refuses this conversation: {e}")
    return calls_span(name, text, family_of(name).prompt_header)


def accepted(c: Constraint, text: str) -> bool:
    return check_text(c.grammar, text).accepted


@pytest.mark.parametrize("name", template_names())
def test_each_template_is_detected_as_its_family(name):
    d = detect_family(template_text(name))
    assert (d.family.name if d.family else None) == EXPECTED[name], d.note
    if EXPECTED[name] is None:
        assert format_for_template(template_text(name)) == "json"  # the CLI adds the warning
        assert not formats()[name]["rendered_ok"]


@pytest.mark.parametrize("name", RENDERING)
@pytest.mark.parametrize("calls", [[PARIS], [PARIS, LONDON]], ids=["one", "two"])
def test_the_templates_calls_are_in_the_family_grammar_and_read_back(name, calls):
    fam = family_of(name)
    if len(calls) == 2 and not fam.parallel:
        pytest.skip(f"{fam.name} writes one call per message (the template renders the first only)")
    span = rendered_span(name, calls)
    c = grammar(name, parallel=len(calls) > 1)
    res = check_text(c.grammar, span)
    assert res.accepted, f"{span!r}: {res.message()}"
    read = read_calls(c.tools, span)
    assert read.error is None
    assert [(x.name, x.arguments) for x in read.calls] == calls


@pytest.mark.parametrize("name", RENDERING)
def test_formats_json_examples_are_in_the_grammar(name):
    meta = formats()[name]["tool_call"]
    fam = family_of(name)
    example = meta["name_and_args"]["example"].removesuffix("<|eot_id|>").removesuffix("</s>")
    example = example.removeprefix(fam.prompt_header)
    assert accepted(grammar(name, False), example), example


@pytest.mark.parametrize("name", RENDERING)
@pytest.mark.parametrize(
    "mutation",
    ["wrong tool name", "missing required", "undeclared parameter", "broken envelope end", "broken envelope start"],
)
def test_a_mutated_rendering_is_rejected(name, mutation):
    c = grammar(name, parallel=False)
    if mutation == "wrong tool name":
        span = rendered_span(name, [("get_time", {"city": "Paris"})])
    elif mutation == "missing required":
        span = rendered_span(name, [("get_weather", {})])
    elif mutation == "undeclared parameter":
        span = rendered_span(name, [("get_weather", {"city": "Paris", "country": "France"})])
    else:
        span = rendered_span(name, [PARIS])
        span = span[:-1] if mutation == "broken envelope end" else span[1:]
    assert not accepted(c, span), span


ALARM = {
    "type": "function",
    "function": {
        "name": "set_alarm",
        "description": "Set an alarm.",
        "parameters": {
            "type": "object",
            "properties": {
                "hour": {"type": "integer", "minimum": 0, "maximum": 23, "description": "Hour."},
                "label": {"type": "string", "maxLength": 30, "description": "Label."},
                "repeat": {"type": "boolean", "description": "Daily."},
                "ratio": {"type": "number", "description": "Volume."},
                "extra": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}},
                    "required": ["a"],
                    "description": "More.",
                },
            },
            "required": ["hour"],
            "additionalProperties": False,
        },
    },
}
PYTHON_REPR_OBJECTS = {"qwen3_coder", "seed_oss"}  # Qwen3-Coder's and Seed-OSS' |string: {'a': 1}, not JSON


@pytest.mark.parametrize("name", RENDERING)
def test_values_of_every_type_in_the_familys_encoding(name):
    """Integers, numbers, booleans and objects, written by the template, read back typed."""
    fam = family_of(name)
    args = {"hour": 7, "label": "wake up", "repeat": True, "ratio": 1.5, "extra": {"a": 1}}
    tools = [WEATHER, ALARM]
    if fam.name in PYTHON_REPR_OBJECTS and name != "Qwen3.5-4B.jinja":
        args.pop("extra")
    try:
        text = render(name, [("set_alarm", args)], tools)
    except jinja2.TemplateError as e:
        pytest.skip(f"{name}: {e}")
    span = calls_span(name, text, fam.prompt_header)
    c = Constraint.from_tools(tools, choice="required", format=fam.name)
    res = check_text(c.grammar, span)
    assert res.accepted, f"{span!r}: {res.message()}"
    read = read_calls(c.tools, span)
    assert [(x.name, x.arguments) for x in read.calls] == [("set_alarm", args)]
    wrong = span.replace("7", "24", 1)  # hour's maximum is 23: the value's own schema holds
    assert not accepted(c, wrong)


def test_gemma_4_nested_values_in_its_own_encoding():
    """Objects, arrays and null inside Gemma 4's calls, written by its template."""
    name = "gemma4.jinja"
    if name not in RENDERING:
        pytest.skip("no gemma4 template")
    trip = {
        "type": "function",
        "function": {
            "name": "plan_trip",
            "description": "Plan.",
            "parameters": {
                "type": "object",
                "properties": {
                    "stops": {"type": "array", "items": {"type": "string"}, "maxItems": 3, "description": "S."},
                    "Budget": {
                        "type": "object",
                        "properties": {"max": {"type": "integer"}, "cur": {"type": "string", "enum": ["EUR", "USD"]}},
                        "required": ["max"],
                        "description": "B.",
                    },
                    "note": {"type": ["string", "null"], "description": "N."},
                },
                "required": ["stops"],
            },
        },
    }
    args = {"stops": ["Rome", "Pisa"], "Budget": {"max": 900, "cur": "EUR"}, "note": None}
    span = calls_span(name, render(name, [("plan_trip", args)], [trip]))
    c = Constraint.from_tools([trip], choice="required", format="gemma4")
    assert accepted(c, span), span
    assert [(x.name, x.arguments) for x in read_calls(c.tools, span).calls] == [("plan_trip", args)]
    for wrong in (
        span.replace("Pisa", 'Pisa<|"|>,<|"|>Nice<|"|>,<|"|>Bari', 1),
        span.replace("max:900", 'cur:<|"|>EUR<|"|>'),
    ):
        assert not accepted(c, wrong), wrong  # four stops; Budget without its required max


@pytest.mark.parametrize("name", [n for n in template_names() if formats()[n]["reasoning"]] if template_names() else [])
def test_the_think_preset_is_the_templates_reasoning_pair(name):
    fam, pair = think_of_template(template_text(name))
    want = formats()[name]["reasoning"]
    assert pair is not None, name
    assert (pair[0] or "").strip() == want["open"].strip() and pair[1].strip() == want["close"].strip()


def test_every_family_in_the_suite_is_covered():
    assert {EXPECTED[n] for n in RENDERING} == set(FAMILIES) - {"json"}


def test_docs_tools_md_holds_the_family_table():
    from pathlib import Path

    from ministruct.grammar.tool_text import families_table

    docs = (Path(__file__).resolve().parents[2] / "docs" / "tools.md").read_text(encoding="utf-8")
    assert families_table() in docs  # regenerate: python -c "from ministruct.grammar.tool_text import families_table"


OPENS_IN_PROMPT = {
    "Qwen3.5-4B.jinja",
    "DeepSeek-V3.2.jinja",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "Kimi-K3.jinja",
    "unsloth-MiniMax-M2.jinja",
    "NVIDIA-Nemotron-Nano-v2.jinja",
}


@pytest.mark.parametrize("name", template_names())
def test_templates_that_open_the_thinking_in_the_prompt(name):
    from ministruct.grammar.tool_families import think_opens_in_prompt

    text = template_text(name)
    _, pair = think_of_template(text)
    assert think_opens_in_prompt(text, pair[0] if pair else None) == (name in OPENS_IN_PROMPT)
    if formats()[name]["reasoning"] is None:
        assert pair is None  # Qwen3-Coder shares Qwen3.5's call markup, not its thinking


@pytest.mark.parametrize("name", [n for n in RENDERING if formats()[n]["reasoning"]] if RENDERING else [])
def test_thinking_then_calls_as_the_template_renders_them(name):
    """The template's rendering of a turn with reasoning and a call, from the reasoning on,
    is in the language of the family's think preset followed by its calls."""
    import json

    from grammar.chat_templates import _environment

    meta = formats()[name]
    text = template_text(name)
    fam, pair = family_of(name), think_of_template(text)[1]
    as_string = meta["tool_call"]["name_and_args"]["arguments_as"] == "JSON string"
    args = {"city": "Paris"}
    call = {"type": "function", "id": "functions.get_weather:0", "function": {"name": "get_weather"}}
    call["function"]["arguments"] = json.dumps(args) if as_string else args
    thought = "I should call it."
    messages = [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": "", "reasoning_content": thought, "thinking": thought, "tool_calls": [call]},
    ]
    full = (
        _environment()
        .from_string(text)
        .render(messages=messages, tools=[WEATHER], add_generation_prompt=False, bos_token="<s>", eos_token="</s>")
    )
    tail = full[full.rindex("What is the weather?") :]
    if thought not in tail:
        pytest.skip(f"{name} drops the reasoning of a turn with calls from what it renders")
    start = tail.index(thought)
    close = meta["tool_call"]["close"].replace("get_weather", "")
    span = tail[start : tail.index(close, start) + len(close)].removesuffix("<|eot_id|>").removesuffix("</s>")
    c = Constraint.from_tools([WEATHER], choice="required", format=fam.name).think_first(close=pair[1], open=pair[0])
    res = check_text(c.grammar, span)
    assert res.accepted, f"{span!r}: {res.message()}"
