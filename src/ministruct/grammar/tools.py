"""Tool calls: an OpenAI `tools` list in, how it may be called (ToolSpec), and the calls
read back from an output in OpenAI's `tool_calls` shape.

A ToolSpec's `format` is a model family (grammar/tool_families.py: the one table of each
family's markup, `json`, `hermes`, `qwen3_coder`, `harmony`, `deepseek_v3_1`, ...); the
grammar of its calls is grammar/tool_grammar.py's, and `read_calls` reads them back in
the family's own markup (grammar/tool_markup.py). `format_for_template` names the family
a chat template writes.

Choices: `required` (a call from the first token), NAME (that tool's call), `none` (free
text) and `auto` (free text, then calls after the family's trigger; a family without one
allows a call, or a text that does not begin like one).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ministruct.errors import InputError, SchemaError, UsageError
from ministruct.grammar.json_text import parse_json
from ministruct.grammar.schema import SchemaOptions
from ministruct.grammar.tool_families import FAMILIES, FAMILY_NAMES, ToolFamily, detect_family
from ministruct.grammar.tool_markup import markup_pieces
from ministruct.grammar.tool_text import MarkupError, MarkupReader

CHOICES = ("auto", "required", "none")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for function names
EMPTY_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}  # OpenAI: no parameters


ToolFormat = ToolFamily  # how one chat template writes tool calls (grammar/tool_families.py)
FORMATS: dict[str, ToolFamily] = FAMILIES
FORMAT_NAMES = FAMILY_NAMES


def detection_note(template: str | None) -> tuple[str, str | None]:
    """(what `--tool-format auto` found in a chat template, a warning when it falls back to json)."""
    d = detect_family(template)
    if d.family is not None:
        return f"{d.family.name} ({d.family.models}): {d.note}", None
    if d.writes_calls:
        return d.note, None
    if not template:
        return "json: no chat template", None
    return "json: the chat template writes no tool calls", (
        "the chat template writes no tool calls: calls are written as plain JSON (--tool-format json); "
        "give --tool-format or a --chat-template that writes the model's calls"
    )


def format_for_template(template: str | None) -> str:
    """The tool format a chat template writes (by its call markup), else `json`; UsageError
    when it renders calls in a markup no family reads."""
    d = detect_family(template)
    if d.family is not None:
        return d.family.name
    if d.writes_calls:
        raise UsageError(f"the chat template's tool calls cannot be read: {d.note}", parameter="tool_format")
    return "json"


@dataclass(frozen=True)
class Tool:
    """One function a model may call."""

    name: str
    description: str
    parameters: Any  # a JSON Schema (dict or bool)

    def to_openai(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class ToolSpec:
    """A tool list and how it may be called: what `Constraint.from_tools` compiles."""

    tools: list[Tool]
    choice: str = "auto"  # auto | required | none | a tool's name
    parallel: bool = False
    format: ToolFormat = field(default_factory=lambda: FORMATS["json"])
    control: frozenset[str] = frozenset()  # the format's tags the vocabulary has as control tokens
    options: SchemaOptions | None = field(default=None, compare=False)  # for the tools' parameters
    detected: str | None = field(default=None, compare=False)  # how `auto` chose the format

    @property
    def allowed(self) -> list[Tool]:
        """The tools a call may name under this choice."""
        if self.choice in CHOICES:
            return [] if self.choice == "none" else list(self.tools)
        return [t for t in self.tools if t.name == self.choice]

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def openai_tool_choice(self) -> Any:
        """The `tool_choice` field of an OpenAI request."""
        if self.choice in CHOICES:
            return self.choice
        return {"type": "function", "function": {"name": self.choice}}


# ---------------------------------------------------------------- reading a tool list


def parse_tools(value: Any, source: str = "<tools>") -> list[Tool]:
    """The tools of an OpenAI `tools` list (items `{"type": "function", "function": {name,
    description, parameters}}`; a bare function object is read as one too, and one tool
    given alone as a list of one).
    SchemaError naming the JSON pointer when an item is malformed."""
    if isinstance(value, dict) and isinstance(value.get("tools"), list):
        value = value["tools"]  # a request body or a file holding {"tools": [...]}
    elif isinstance(value, dict) and ("function" in value or "name" in value):
        value = [value]  # one tool (or one bare function) given alone
    if not isinstance(value, list) or not value:
        raise SchemaError("a tool list must be a non-empty JSON array of tools", pointer="/", source=source)
    tools: list[Tool] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        ptr = f"/{i}"
        if not isinstance(item, dict):
            raise SchemaError("a tool must be an object", pointer=ptr, source=source)
        fn = item
        if "function" in item or "type" in item:
            if item.get("type", "function") != "function":
                raise SchemaError(
                    f'only tools of type "function" can be called, not {json.dumps(item.get("type"))}',
                    pointer=f"{ptr}/type",
                    source=source,
                )
            fn = item.get("function")
            ptr += "/function"
            if not isinstance(fn, dict):
                raise SchemaError("a function tool needs a `function` object", pointer=ptr, source=source)
        name = fn.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise SchemaError(
                f"a function name must be 1 to 64 of a-z, A-Z, 0-9, _ and -, not {json.dumps(name)}",
                pointer=f"{ptr}/name",
                source=source,
            )
        if name in seen:
            raise SchemaError(f"the name {name} is given twice", pointer=f"{ptr}/name", source=source)
        seen.add(name)
        desc = fn.get("description", "")
        if not isinstance(desc, str):
            raise SchemaError("a description must be a string", pointer=f"{ptr}/description", source=source)
        params = fn.get("parameters", EMPTY_PARAMETERS)
        if not isinstance(params, (dict, bool)):
            raise SchemaError("parameters must be a JSON Schema object", pointer=f"{ptr}/parameters", source=source)
        kind = params.get("type", "object") if isinstance(params, dict) else "object"
        if kind != "object" and not (isinstance(kind, list) and "object" in kind):
            raise SchemaError(
                f'parameters must describe the arguments object (type "object"), not type {json.dumps(kind)}',
                pointer=f"{ptr}/parameters/type",
                source=source,
            )
        tools.append(Tool(name, desc, params))
    return tools


def read_choice(value: Any, tools: list[Tool]) -> str:
    """auto, required, none or a tool's name, from a string or OpenAI's
    `{"type": "function", "function": {"name": ...}}`; UsageError naming `tool_choice`."""
    if isinstance(value, dict):
        fn = value.get("function")
        value = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(value, str):
        raise UsageError("tool_choice must be auto, required, none or a tool's name", parameter="tool_choice")
    if value in CHOICES or any(t.name == value for t in tools):
        return value
    names = ", ".join(t.name for t in tools)
    raise UsageError(
        f"tool_choice {value!r} is not auto, required, none nor one of the tools ({names})", parameter="tool_choice"
    )


def read_format(name: str, template: str | None = None) -> ToolFormat:
    """A format by name; `auto` reads it from the chat template (json when it writes no
    calls; UsageError when it writes them in a markup no family reads)."""
    if name == "auto":
        name = format_for_template(template)
    if name not in FORMATS:
        raise UsageError(
            f"tool format must be auto or one of {', '.join(FORMAT_NAMES)}, not {name!r}", parameter="tool_format"
        )
    return FORMATS[name]


def example_call(fam: ToolFamily) -> str:
    """One call in the family's markup with its placeholders named, for the user message."""
    param = fam.param or ""
    for k, v in (("«key»", "<parameter>"), ("«value»", "<value>"), ("«type»", "string"), ("«string»", "true")):
        param = param.replace(k, v)
    args = "<its arguments>" if fam.json_args else param + "..."
    text = fam.call.replace("«name»", "<function name>").replace("«args»", args)
    text = text.replace("«index»", "0").replace("«id»", "")
    return re.sub(r"«\?([^»]*)»", r"\1", text)


def tools_instruction(spec: ToolSpec) -> str:
    """What the user message says about the tools (the schema text's counterpart): the
    functions as OpenAI lists them and the shape of a call in the spec's format."""
    if spec.choice == "none":
        return ""
    lay = calls_layout(spec)
    listed = json.dumps([t.to_openai()["function"] for t in spec.allowed], ensure_ascii=False)
    example = re.sub(r"«\?([^»]*)»", "", lay.open) + example_call(spec.format) + re.sub(r"«\?([^»]*)»", "", lay.close)
    how = {
        "auto": "If a function helps, call it by answering with",
        "required": "Call one of them by answering with",
    }.get(spec.choice, f"Call {spec.choice} by answering with")
    more = " You may make several calls." if lay.several else ""
    return f"You can call these functions:\n{listed}\n{how}: {example}{more}"


@dataclass(frozen=True)
class CallsLayout:
    """The texts around and between the calls of one answer (family texts, «» kept)."""

    open: str
    first: str  # the first call's markup (without the trigger, after one)
    sep: str
    close: str
    several: bool


def calls_layout(spec: ToolSpec, *, after_trigger: bool = False) -> CallsLayout:
    """The calls' texts for `spec` (`after_trigger`: what follows the trigger of `auto`)."""
    fam = spec.format
    open_, close, first = fam.open, fam.close, fam.call
    if fam.array_when_parallel:
        open_, close = ("[", "]") if spec.parallel else ("", "")
    if fam.think_gap and not after_trigger:  # (after a trigger, free text holds it)
        open_ = f"«?{fam.think_gap}»" + open_ if open_ else open_
        first = first if open_ else f"«?{fam.think_gap}»" + first
    if after_trigger and fam.trigger:
        if open_ and all(p.kind == "opt" for p in markup_pieces(open_)):
            open_ = ""  # an optional header before the trigger: free text does not write it
        if open_.startswith(fam.trigger):
            open_ = open_[len(fam.trigger) :]
        elif not open_ and first.startswith(fam.trigger):
            first = first[len(fam.trigger) :]
        else:
            raise ValueError(f"{fam.name}: the trigger {fam.trigger!r} does not begin the calls")
    return CallsLayout(open_, first, fam.sep, close, spec.parallel and fam.parallel)


def call_start(spec: ToolSpec) -> str:
    """The first character of every answer of calls (a text beginning otherwise is free text,
    under `auto` for a format without a trigger)."""
    lay = calls_layout(spec)
    return re.sub(r"«\?[^»]*»", "", lay.open + lay.first)[0]


def name_target(spec: ToolSpec, name: str) -> bytes:
    """The bytes that tell a call's name apart from the others: the name and the character
    the markup writes right after it (none when that markup is a control token)."""
    pieces = spec.format.call.split("«name»", 1)
    after = pieces[1] if len(pieces) > 1 else ""
    if after.startswith("«") or any(after.startswith(c) for c in spec.control):
        return name.encode()
    return (name + after[:1]).encode()


# ---------------------------------------------------------------- reading calls back


@dataclass
class ToolCall:
    """One call read from an output: the tool's name, its arguments, and where the name is."""

    name: str
    arguments: Any
    name_offset: int  # character offset of the name's first character in the output

    def openai(self, call_id: str) -> dict:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass
class ReadCalls:
    """An answer split into its free text (`content`) and its calls."""

    content: str | None
    calls: list[ToolCall]
    error: str | None = None  # why the calls part does not read (an incomplete output)

    def tool_calls(self, salt: str = "") -> list[dict]:
        """The calls in OpenAI's `tool_calls` shape; ids depend on `salt`, the text and the index."""
        out = []
        for i, c in enumerate(self.calls):
            digest = hashlib.sha256(f"{salt}\0{i}\0{c.name}\0{json.dumps(c.arguments)}".encode()).hexdigest()
            out.append(c.openai(f"call_{digest[:24]}"))
        return out


def read_calls(spec: ToolSpec, text: str, *, calls_at: int | None = None) -> ReadCalls:
    """The free text and calls of an output of `spec`'s grammar, read in the family's own
    markup (`text` holds the markup written out: control tokens as their text). The free
    text of `auto` ends at the first trigger. Where the trigger is a control token
    (`spec.control`), `calls_at` is the character right after that token (the generated
    tokens say where it was; None: no trigger token, the answer is free text)."""
    if spec.choice == "none":
        return ReadCalls(text, [])
    fam = spec.format
    auto_trigger = fam.trigger is not None and spec.choice == "auto"
    start, content_end = 0, 0
    if auto_trigger and fam.trigger in spec.control:
        if calls_at is None:
            return ReadCalls(text, [])
        start, content_end = calls_at, max(calls_at - len(fam.trigger), 0)
    elif auto_trigger:
        at = text.find(fam.trigger)  # type: ignore[arg-type]
        if at < 0:
            return ReadCalls(text, [])
        start, content_end = at + len(fam.trigger), at  # type: ignore[arg-type]
    elif spec.choice == "auto" and not text.startswith(call_start(spec)):
        return ReadCalls(text, [])
    content = text[:content_end] or None
    lay = calls_layout(spec, after_trigger=auto_trigger)
    tools = {t.name: t.parameters for t in spec.tools}
    reader = MarkupReader(fam, text, start, tools)
    calls: list[ToolCall] = []
    try:
        reader.pieces(lay.open)
        call_text = lay.first
        while True:
            name, args, at = reader.call(call_text)
            calls.append(ToolCall(name, args, at))
            call_text = fam.call
            mark = reader.pos
            if not (lay.several and reader.take_pieces(lay.sep) and reader.starts_call(call_text)):
                reader.pos = mark
                break
        reader.pieces(lay.close)
        if reader.pos != len(text):
            raise MarkupError(f"unexpected text after the calls at character {reader.pos}")
    except MarkupError as e:
        return ReadCalls(content, calls, str(e))
    return ReadCalls(content, calls)


def load_tools_text(text: str, source: str) -> list[Tool]:
    """The tools of a JSON text; InputError naming the file when it is not JSON."""
    try:
        value = parse_json(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    return parse_tools(value, source)
