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
text) and `auto` (free text that may end the answer, or free text, the format's trigger
and the calls; for a format without a trigger, a call or text that does not start like
one).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ministruct.errors import InputError, SchemaError, UsageError
from ministruct.grammar.ir import EMPTY, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, alt, rename_refs, seq
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar

CHOICES = ("auto", "required", "none")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # OpenAI's rule for function names
EMPTY_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": False}  # OpenAI: no parameters
ANY_CHAR = CharClass((), negated=True)


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

    def in_array(self, parallel: bool) -> bool:
        return self.array == "always" or (self.array == "parallel" and parallel)


FORMATS: dict[str, ToolFormat] = {
    "json": ToolFormat("json", array="parallel"),
    "hermes": ToolFormat(
        "hermes", call_open="<tool_call>\n", call_close="\n</tool_call>", sep="\n", trigger="<tool_call>"
    ),
    "mistral": ToolFormat("mistral", open="[TOOL_CALLS]", array="always", trigger="[TOOL_CALLS]"),
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
    """The one exact grammar of the answers `spec` allows."""
    options = options or SchemaOptions()
    rules: dict[str, Expr] = {"root": EMPTY}
    warnings: list[str] = []
    if spec.choice == "none":
        rules["root"] = Repeat(ANY_CHAR, 0, None)
        return Grammar(rules, source=source)
    fmt = spec.format
    options_of_name: list[Expr] = []
    interned: dict[Expr, str] = {}
    for i, tool in enumerate(spec.tools):
        if tool not in spec.allowed:
            continue
        args = _parameters_expr(tool, i, options, rules, interned, warnings, source)
        head = Literal(json.dumps(tool.name) + f', "{fmt.args_key}": ')
        options_of_name.append(seq(head, args))
    call = seq(Literal('{"name": '), alt(*options_of_name), Literal("}"))
    rules["call"] = call
    one = seq(Literal(fmt.call_open), RuleRef("call"), Literal(fmt.call_close))
    if fmt.in_array(spec.parallel):
        more = Repeat(seq(Literal(", "), one), 0, None if spec.parallel else 0)
        body = seq(Literal("["), one, more, Literal("]")) if spec.parallel else seq(Literal("["), one, Literal("]"))
    elif spec.parallel:
        body = seq(one, Repeat(seq(Literal(fmt.sep), one), 0, None))
    else:
        body = one
    calls = seq(Literal(fmt.open), body)
    if spec.choice == "auto":
        start = fmt.trigger or (fmt.open + fmt.call_open + ("[" if fmt.in_array(spec.parallel) else "{"))
        calls = free_then(calls, start, ends_free=fmt.trigger is not None)
    rules["root"] = calls
    return Grammar(rules, source=source, warnings=warnings)


def free_then(constrained: Expr, start: str, *, ends_free: bool) -> Expr:
    """Free text that may end the answer, or `constrained` (which begins with `start`).

    `ends_free`: free text, then optionally `constrained` (`start` never occurs in the free
    text); else either `constrained` alone or free text that does not begin with `start`'s
    first character. The one place `auto` builds its free-text part (the think-first
    combinator can replace it)."""
    if ends_free:
        return seq(text_without(start), Repeat(constrained, 0, 1))
    cp = ord(start[0])
    return alt(constrained, EMPTY, seq(CharClass(((cp, cp),), negated=True), Repeat(ANY_CHAR, 0, None)))


def text_without(word: str) -> Expr:
    """Every string in which `word` does not occur (`word`'s first character must not recur in it)."""
    if not word or word[0] in word[1:]:
        raise ValueError(f"text_without needs a word whose first character does not recur, not {word!r}")
    c0, rest = word[0], word[1:]
    cp = ord(c0)
    no_c0 = CharClass(((cp, cp),), negated=True)
    # the text between one c0 and the next (or the end) must not start with `rest`
    stops = [Literal(rest[:k]) for k in range(len(rest))]
    turns = [
        seq(Literal(rest[:k]), CharClass(((cp, cp), (ord(rest[k]),) * 2), negated=True), Repeat(no_c0, 0, None))
        for k in range(len(rest))
    ]
    return seq(Repeat(no_c0, 0, None), Repeat(seq(Literal(c0), alt(*stops, *turns)), 0, None))


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


def read_calls(spec: ToolSpec, text: str) -> ReadCalls:
    """The free text and calls of an output of `spec`'s grammar (read in the format's own
    syntax; a JSON value is read whole, whatever its strings hold)."""
    if spec.choice == "none":
        return ReadCalls(text, [])
    fmt = spec.format
    start = 0
    if fmt.trigger is not None:
        at = text.find(fmt.trigger)
        if at < 0:
            return ReadCalls(text if spec.choice == "auto" else None, [], None if spec.choice == "auto" else "no call")
        start = at
    elif spec.choice == "auto" and not text.startswith(("{", "[")):
        return ReadCalls(text, [])
    content = text[:start] if start else None
    reader = _Reader(text, start, fmt.args_key)
    try:
        reader.expect(fmt.open)
        if fmt.in_array(spec.parallel):
            reader.expect("[")
            while True:
                reader.call(fmt)
                if reader.take(", "):
                    continue
                reader.expect("]")
                break
        else:
            reader.call(fmt)
            while spec.parallel and fmt.sep and reader.take(fmt.sep + fmt.call_open, keep=len(fmt.sep)):
                reader.call(fmt)
        if reader.pos != len(text):
            raise ValueError(f"unexpected text after the calls at character {reader.pos}")
    except ValueError as e:
        return ReadCalls(content, reader.calls, str(e))
    return ReadCalls(content, reader.calls)


class _Reader:
    def __init__(self, text: str, pos: int, args_key: str) -> None:
        self.text, self.pos, self.args_key = text, pos, args_key
        self.calls: list[ToolCall] = []
        self._decoder = json.JSONDecoder()

    def take(self, s: str, keep: int | None = None) -> bool:
        if self.text.startswith(s, self.pos):
            self.pos += len(s) if keep is None else keep
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.take(s):
            raise ValueError(f"expected {s!r} at character {self.pos}")

    def call(self, fmt: ToolFormat) -> None:
        self.expect(fmt.call_open)
        try:
            obj, end = self._decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as e:
            raise ValueError(f"the call at character {self.pos} is not JSON: {e.msg}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or self.args_key not in obj:
            raise ValueError(f'the call at character {self.pos} has no "name" and "{self.args_key}"')
        name_at = self.text.index('"name": ', self.pos) + len('"name": "')
        self.calls.append(ToolCall(obj["name"], obj[self.args_key], name_at))
        self.pos = end
        self.expect(fmt.call_close)


def load_tools_text(text: str, source: str) -> list[Tool]:
    """The tools of a JSON text; InputError naming the file when it is not JSON."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{source}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    return parse_tools(value, source)
