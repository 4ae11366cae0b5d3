"""Tool calls: an OpenAI `tools` list in, one exact grammar of calls out, and the calls
read back from an output in OpenAI's `tool_calls` shape.

The grammar of one call writes the name first, as a choice among constants (each name
with its closing quote, so `get_weather` and `get_weather_forecast` stay apart), then that
tool's `parameters` through the JSON Schema front end (SchemaOptions):

    {"name": "get_weather", "arguments": <an instance of get_weather's parameters>}

The envelope is written as the chat templates and OpenAI write it (`, ` and `: `); the
arguments follow SchemaOptions' whitespace. Formats (the wrappers of common chat
templates, as llama.cpp's chat handlers and vLLM's tool parsers read them):

    json     {"name": ..., "arguments": {...}}; parallel calls: a JSON array of them
    hermes   <tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>, one block per
             call, blocks separated by \\n (Hermes 2 Pro, Qwen 2.5 and Qwen 3 templates)
    mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (Mistral Nemo / Small)
    llama3   {"name": ..., "parameters": {...}}; parallel calls separated by `; `
             (Llama 3.1 / 3.2 JSON tool calling)

Choices: `required` (a call from the first token), NAME (that tool's call), `none` (free
text) and `auto`. With a trigger, `auto` is the free-text-then-constraint grammar of
grammar/think.py (`free_text_then`, `may_end_in_free_text`): free text up to the first
trigger, then the calls, or free text alone; where the vocabulary has the trigger as one
control token (`ToolSpec.control`), CLOSE is that token. A format without a trigger
(`json`, `llama3`) has no text that ends free text: its `auto` is a call, or a text that
does not begin with the calls' first character (`{`, or `[` for a JSON array).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ministruct.errors import InputError, SchemaError, UsageError
from ministruct.grammar.ir import EMPTY, Expr, Grammar, Literal, Repeat, RuleRef, TokenRef, alt, rename_refs, seq
from ministruct.grammar.json_text import parse_json, parse_json_prefix
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar
from ministruct.grammar.think import ANY_TEXT, free_text_then, text_not_starting_with

CHOICES = ("auto", "required", "none")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for function names
EMPTY_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}  # OpenAI: no parameters


@dataclass(frozen=True)
class ToolFormat:
    """How one chat template writes tool calls."""

    name: str
    args_key: str = "arguments"  # the envelope's key for the arguments
    open: str = ""  # before all the calls
    call_open: str = ""  # before each call
    call_close: str = ""  # after each call
    sep: str = ""  # between calls (not in an array)
    array: str = "never"  # "never" | "parallel" (an array when calls may be several) | "always"
    trigger: str | None = None  # what starts the calls after free text (auto); None: the call starts the answer
    tags: tuple[str, ...] = ()  # the markup a vocabulary may hold as control tokens (Qwen's <tool_call>)

    def in_array(self, parallel: bool) -> bool:
        return self.array == "always" or (self.array == "parallel" and parallel)


FORMATS: dict[str, ToolFormat] = {
    "json": ToolFormat("json", array="parallel"),
    "hermes": ToolFormat(
        "hermes",
        call_open="<tool_call>\n",
        call_close="\n</tool_call>",
        sep="\n",
        trigger="<tool_call>",
        tags=("<tool_call>", "</tool_call>"),
    ),
    "mistral": ToolFormat(
        "mistral", open="[TOOL_CALLS]", array="always", trigger="[TOOL_CALLS]", tags=("[TOOL_CALLS]",)
    ),
    "llama3": ToolFormat("llama3", args_key="parameters", sep="; "),
}
FORMAT_NAMES = tuple(FORMATS)


def format_for_template(template: str | None) -> str:
    """The tool format a chat template declares (by the call markup it writes), else `json`."""
    if not template:
        return "json"
    if "<tool_call>" in template:
        return "hermes"
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<|python_tag|>" in template or ("ipython" in template and '"parameters"' in template):
        return "llama3"
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
    description, parameters}}`; a bare function object is read as one too).
    SchemaError naming the JSON pointer when an item is malformed."""
    if isinstance(value, dict) and isinstance(value.get("tools"), list):
        value = value["tools"]  # a request body or a file holding {"tools": [...]}
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
    """A format by name; `auto` reads it from the chat template (json when it declares none)."""
    if name == "auto":
        name = format_for_template(template)
    if name not in FORMATS:
        raise UsageError(
            f"tool format must be auto or one of {', '.join(FORMAT_NAMES)}, not {name!r}", parameter="tool_format"
        )
    return FORMATS[name]


def tools_instruction(spec: ToolSpec) -> str:
    """What the user message says about the tools (the schema text's counterpart): the
    functions as OpenAI lists them and the shape of a call in the spec's format."""
    if spec.choice == "none":
        return ""
    fmt = spec.format
    listed = json.dumps([t.to_openai()["function"] for t in spec.allowed], ensure_ascii=False)
    example = f"{fmt.open}{'[' if fmt.in_array(spec.parallel) else ''}{fmt.call_open}"
    example += f'{{"name": <function name>, "{fmt.args_key}": <its arguments>}}{fmt.call_close}'
    example += "]" if fmt.in_array(spec.parallel) else ""
    how = {
        "auto": "If a function helps, call it by answering with",
        "required": "Call one of them by answering with",
    }.get(spec.choice, f"Call {spec.choice} by answering with")
    more = " You may make several calls." if spec.parallel else ""
    return f"You can call these functions:\n{listed}\n{how}: {example}{more}"


# ---------------------------------------------------------------- the grammar


def tools_grammar(spec: ToolSpec, options: SchemaOptions | None = None, *, source: str = "<tools>") -> Grammar:
    """The one exact grammar of the answers `spec` allows.

    `auto` with a trigger is grammar/think.py's `free_text_then`: free text, the trigger as
    CLOSE (the control token where `spec.control` names it), then the calls; the output may
    also end in the free text. Without a trigger, a call or a text that does not begin with
    the calls' first character (think.py's `text_not_starting_with`)."""
    options = options or spec.options or SchemaOptions()
    if spec.choice == "none":
        return Grammar({"root": ANY_TEXT}, source=source)
    fmt = spec.format
    rules: dict[str, Expr] = {"root": EMPTY}
    warnings: list[str] = []
    options_of_name: list[Expr] = []
    interned: dict[Expr, str] = {}
    for i, tool in enumerate(spec.tools):
        if tool not in spec.allowed:
            continue
        args = _parameters_expr(tool, i, options, rules, interned, warnings, source)
        head = Literal(json.dumps(tool.name) + f', "{fmt.args_key}": ')
        options_of_name.append(seq(head, args))
    rules["call"] = seq(Literal('{"name": '), alt(*options_of_name), Literal("}"))
    lead = calls_lead(spec)
    if spec.choice != "auto":
        rules["root"] = _calls(spec, lead)
        return Grammar(rules, source=source, warnings=warnings)
    if fmt.trigger is None:
        rules["calls"] = _calls(spec, lead)
        rules["root"] = alt(RuleRef("calls"), text_not_starting_with(call_start(spec)))
        return Grammar(rules, source=source, warnings=warnings)
    rules["root"] = _calls(spec, lead[len(fmt.trigger) :])
    close: str | TokenRef = TokenRef(name=fmt.trigger) if fmt.trigger in spec.control else fmt.trigger
    answer = Grammar(rules, source=source, warnings=warnings)
    return free_text_then(answer, close=close, may_end_in_free_text=True)


def calls_lead(spec: ToolSpec) -> str:
    """The text every answer of calls begins with (the format's trigger, when it has one, first)."""
    fmt = spec.format
    return fmt.open + ("[" if fmt.in_array(spec.parallel) else "") + fmt.call_open


def call_start(spec: ToolSpec) -> str:
    """The first character of every answer of calls (a text beginning otherwise is free text,
    under `auto` for a format without a trigger)."""
    return (calls_lead(spec) or "{")[0]


def _calls(spec: ToolSpec, lead: str) -> Expr:
    """`lead`, the first call, and (parallel) the further ones: the calls after `lead`."""
    fmt = spec.format
    in_array = fmt.in_array(spec.parallel)
    markup = functools.partial(_markup, control=spec.control)
    sep = ", " if in_array else fmt.sep
    one_more = seq(markup(sep), markup(fmt.call_open), RuleRef("call"), markup(fmt.call_close))
    more = Repeat(one_more, 0, None) if spec.parallel else EMPTY
    return seq(markup(lead), RuleRef("call"), markup(fmt.call_close), more, Literal("]" if in_array else ""))


def _markup(text: str, control: frozenset[str]) -> Expr:
    """`text` with each of the `control` texts in it as that control token."""
    if not control or not text:
        return Literal(text)
    pattern = "(" + "|".join(re.escape(c) for c in sorted(control, key=len, reverse=True)) + ")"
    parts = [p for p in re.split(pattern, text) if p]
    return seq(*(TokenRef(name=p) if p in control else Literal(p) for p in parts))


def _parameters_expr(
    tool: Tool,
    index: int,
    options: SchemaOptions,
    rules: dict[str, Expr],
    interned: dict[Expr, str],
    warnings: list[str],
    source: str,
) -> Expr:
    """The tool's `parameters` through the schema front end; its rules join `rules` under a
    prefix of their own (a rule equal to one already there, with its references, is shared
    instead: tools repeat the same string, number and format rules), and its root comes back
    as an expression."""
    where = f"{source}: tool {tool.name}"
    try:
        g = schema_to_grammar(tool.parameters, options, source=where)
    except SchemaError as e:
        raise SchemaError(e.reason, pointer=e.pointer, keyword=e.keyword, source=where) from None
    prefix = f"t{index}-"
    refs = g.references()
    recursive = _recursive(refs)
    names = {n: prefix + n for n in recursive}
    memo: dict[int, Expr] = {}
    for n in _children_first(refs, g.root):
        if n in recursive or n == g.root:
            continue
        body = rename_refs(g.rules[n], names, memo)
        shared = interned.get(body)
        if shared is None:
            shared = interned[body] = prefix + n
            rules[shared] = body
        names[n] = shared
    for n in recursive:
        if n != g.root:
            rules[names[n]] = rename_refs(g.rules[n], names, memo)
    warnings.extend(f"tool {tool.name}: {w}" for w in g.warnings)
    return rename_refs(g.rules[g.root], names, memo)


def _children_first(refs: dict[str, set[str]], root: str) -> list[str]:
    """Every rule reachable from `root`, each after the rules it refers to (cycles cut)."""
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        stack.append((n, True))
        stack.extend((m, False) for m in sorted(refs.get(n, ())) if m not in seen)
    return order


def _recursive(refs: dict[str, set[str]]) -> set[str]:
    """The rules that can reach themselves, and those that refer to one (named before the rest)."""
    out: set[str] = set()
    for start in refs:
        stack, seen = list(refs[start]), set()
        while stack:
            m = stack.pop()
            if m == start:
                out.add(start)
                break
            if m in seen:
                continue
            seen.add(m)
            stack.extend(refs.get(m, ()))
    grown = True
    while grown:  # a rule referring to a recursive one is renamed with it: its body is not final yet
        grown = False
        for n, rs in refs.items():
            if n not in out and rs & out:
                out.add(n)
                grown = True
    return out


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
    """The free text and calls of an output of `spec`'s grammar (read in the format's own
    syntax; a JSON value is read whole, whatever its strings hold). The free text of `auto`
    ends at the first trigger. A trigger that is a control token (`spec.control`) writes no
    text: `calls_at` is the character where the calls begin after it (the generated tokens
    say where it was; None: no trigger token, the answer is free text)."""
    if spec.choice == "none":
        return ReadCalls(text, [])
    fmt = spec.format
    lead = calls_lead(spec)
    start = 0
    if fmt.trigger is not None and fmt.trigger in spec.control and spec.choice == "auto":
        if calls_at is None:
            return ReadCalls(text, [])
        start, lead = calls_at, lead[len(fmt.trigger) :]
    elif fmt.trigger is not None and spec.choice == "auto":
        at = text.find(fmt.trigger)
        if at < 0:
            return ReadCalls(text, [])
        start = at
    elif spec.choice == "auto" and not text.startswith(call_start(spec)):
        return ReadCalls(text, [])
    content = text[: calls_at if calls_at is not None else start] or None
    reader = _Reader(text, start, fmt.args_key, spec.control)
    try:
        reader.expect(lead)
        in_array = fmt.in_array(spec.parallel)
        while True:
            reader.call()
            reader.expect(fmt.call_close)
            if not (spec.parallel and reader.take((", " if in_array else fmt.sep) + fmt.call_open)):
                break
        reader.expect("]" if in_array else "")
        if reader.pos != len(text):
            raise ValueError(f"unexpected text after the calls at character {reader.pos}")
    except ValueError as e:
        return ReadCalls(content, reader.calls, str(e))
    return ReadCalls(content, reader.calls)


class _Reader:
    """Reads markup and calls from a position on; markup that is a control token writes no text."""

    def __init__(self, text: str, pos: int, args_key: str, control: frozenset[str]) -> None:
        self.text, self.pos, self.args_key, self.control = text, pos, args_key, control
        self.calls: list[ToolCall] = []

    def take(self, s: str) -> bool:
        for tag in self.control:
            s = s.replace(tag, "")
        if self.text.startswith(s, self.pos):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.take(s):
            raise ValueError(f"expected {s!r} at character {self.pos}")

    def call(self) -> None:
        try:
            obj, end = parse_json_prefix(self.text, self.pos)
        except json.JSONDecodeError as e:
            raise ValueError(f"the call at character {self.pos} is not JSON: {e.msg}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or self.args_key not in obj:
            raise ValueError(f'the call at character {self.pos} has no "name" and "{self.args_key}"')
        name_at = self.text.index('"name": ', self.pos) + len('"name": "')
        self.calls.append(ToolCall(obj["name"], obj[self.args_key], name_at))
        self.pos = end


def load_tools_text(text: str, source: str) -> list[Tool]:
    """The tools of a JSON text; InputError naming the file when it is not JSON."""
    try:
        value = parse_json(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    return parse_tools(value, source)
