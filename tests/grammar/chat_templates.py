"""The chat-template suite (../shared/suites/chat_templates): templates rendered with jinja2 the
way Hugging Face transformers renders them (the suite's README), and the assistant part of a
rendered conversation with tool calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

SUITE = Path(__file__).resolve().parents[3] / "shared" / "suites" / "chat_templates"
FORMATS_JSON = SUITE / "formats.json"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city."}},
            "required": ["city"],
        },
    },
}


def formats() -> dict[str, Any]:
    if not FORMATS_JSON.exists():
        pytest.skip(f"the chat-template suite is not at {SUITE}")
    data = json.loads(FORMATS_JSON.read_text(encoding="utf-8"))
    data.pop("_about", None)
    return data


def template_names() -> list[str]:
    if not FORMATS_JSON.exists():
        return []
    return [k for k in json.loads(FORMATS_JSON.read_text(encoding="utf-8")) if k != "_about"]


def template_text(name: str) -> str:
    return (SUITE / name).read_text(encoding="utf-8")


def _environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, Generation]
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "2026-01-01"
    return env


def render(name: str, calls: list[tuple[str, dict]], tools: list[dict]) -> str:
    """The template's whole rendering of [user, assistant with `calls`] (formats.json's
    settings: arguments as an object or a JSON string, Kimi's and Mistral's ids)."""
    meta = formats()[name]
    as_string = meta["tool_call"]["name_and_args"]["arguments_as"] == "JSON string"
    tool_calls = []
    for i, (fn, args) in enumerate(calls):
        call_id = f"functions.{fn}:{i}" if "Kimi" in name else f"call{i:05d}x"
        tool_calls.append(
            {
                "type": "function",
                "id": call_id,
                "function": {"name": fn, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args},
            }
        )
    content = None if "R1" in name else ""
    messages = [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": content, "tool_calls": tool_calls},
    ]
    template = _environment().from_string(template_text(name))
    return template.render(
        messages=messages, tools=tools, add_generation_prompt=False, bos_token="<s>", eos_token="</s>"
    )


def calls_span(name: str, rendered: str, header: str = "") -> str:
    """The markup of the calls in a rendering: from the last `tool_call.open` to the last
    `tool_call.close` (after the last user message); `header` (what a generation prompt
    writes before the calls) is left out."""
    meta = formats()[name]["tool_call"]
    tail = rendered[rendered.rindex("What is the weather?") :]
    start = tail.index(meta["open"].replace("get_weather", ""))
    end = tail.rindex(meta["close"]) + len(meta["close"])
    span = tail[start:end]
    for eot in ("<|eot_id|>", "</s>"):  # a close that ends the turn: the end of generation, not markup
        span = span.removesuffix(eot)
    return span[len(header) :] if header and span.startswith(header) else span
