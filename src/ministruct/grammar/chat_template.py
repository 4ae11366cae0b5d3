"""Chat templates (Jinja) rendered as Hugging Face transformers renders them, and what a
rendering says about a template: whether it writes tool calls at all, and whether its
generation prompt opens the thinking.

The environment: a sandbox with `trim_blocks` and `lstrip_blocks`, loop controls,
transformers' `{% generation %}` block (its body rendered), `tojson` as transformers
defines it (no key sorting, no HTML escaping), `raise_exception` and `strftime_now`.
"""

from __future__ import annotations

import datetime
import functools
import json
from typing import Any

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_tool_x",
        "description": "A probe.",
        "parameters": {"type": "object", "properties": {"arg": {"type": "string", "description": "An argument."}}},
    },
}
PROBE_ARGUMENT = "probe-value-7"


class TemplateError(ValueError):
    """A template that cannot be read or rendered."""


@functools.lru_cache(maxsize=1)
def environment():
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body", []), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent=None, separators=None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, Generation]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


@functools.lru_cache(maxsize=16)
def compiled(template: str):
    """The template compiled (TemplateError when Jinja cannot read it)."""
    import jinja2

    try:
        return environment().from_string(template)
    except jinja2.TemplateError as e:
        raise TemplateError(f"the chat template cannot be read: {e}") from None


def render(template: str, messages: list[dict], **variables: Any) -> str:
    """The template's text for `messages` (TemplateError when it refuses them)."""
    try:
        return compiled(template).render(messages=messages, **variables)
    except TemplateError:
        raise
    except Exception as e:  # a template raises what it likes (raise_exception, TypeError, ...)
        raise TemplateError(" ".join(str(e).split())) from None


def writes_tool_calls(template: str) -> bool | None:
    """Whether rendering an assistant message with a tool call writes the call (its name and
    argument) beyond what the same message without it writes: llama.cpp's test. None when
    the template renders neither."""
    user = {"role": "user", "content": "Hi"}
    base = {"bos_token": "", "eos_token": "", "add_generation_prompt": False, "tools": [PROBE_TOOL]}
    for as_string in (False, True):
        args: Any = {"arg": PROBE_ARGUMENT}
        call = {
            "id": "functions.probe_tool_x:0",
            "type": "function",
            "function": {"name": "probe_tool_x", "arguments": json.dumps(args) if as_string else args},
        }
        try:
            with_call = render(template, [user, {"role": "assistant", "content": "", "tool_calls": [call]}], **base)
            without = render(template, [user, {"role": "assistant", "content": ""}], **base)
        except TemplateError:
            continue
        return with_call.count(PROBE_ARGUMENT) > without.count(PROBE_ARGUMENT)
    return None


def generation_prompt(template: str) -> str | None:
    """What the template writes to open an assistant turn (the prompt with the generation
    prompt minus the prompt without it), None when it cannot render them."""
    user = [{"role": "user", "content": "Hi"}]
    try:
        opened = render(template, user, add_generation_prompt=True, bos_token="", eos_token="")
        plain = render(template, user, add_generation_prompt=False, bos_token="", eos_token="")
    except TemplateError:
        return None
    return opened[len(plain) :] if opened.startswith(plain) else None


__all__ = ["TemplateError", "compiled", "environment", "generation_prompt", "render", "writes_tool_calls"]
