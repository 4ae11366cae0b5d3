"""The tool-call markup of each model family: one table (FAMILIES), and the family a chat
template writes (`detect_family`).

A family's markup is a few texts with placeholders in «»:

    open, close     around all the calls of one answer (a section, or a JSON array)
    call            one call: «name» (the tool's name), «args» (its arguments), «index»
                    (a call counter the model writes: digits), «id» (an optional call id),
                    «?TEXT» (TEXT or nothing: a newline one template writes and another not)
    sep             between two calls
    param           (families whose arguments are markup, not JSON) one parameter:
                    «key», «value», «type» (Kimi K3's JSON type name), «string» (DeepSeek
                    V3.2's "true"/"false"); `param_sep` between two parameters

`values` says how a parameter's value is written: `raw` (a string as is, up to the markup
that follows it; any other value as JSON), `quoted` (a string between two `quote`s, the
rest as JSON: Gemma 4), `python` (a string in single quotes, numbers and objects as JSON:
LFM2.5); `python_scalars`: True/False/None as Python writes them (the templates'
`|string`). `layout` is the JSON layout of the arguments the template writes (`spaced`:
`{"city": "Paris"}`, as `tojson` writes it); None: the SchemaOptions' own.

`think` is the family's reasoning pair (open, close); `think_in_prompt`: the template's
generation prompt opens it (only the close is generated).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SPACED = "spaced"  # json.dumps' default separators, as Jinja's tojson in the templates


@dataclass(frozen=True)
class ToolFamily:
    """How one model family writes tool calls (see the module doc for the placeholders)."""

    name: str
    models: str  # the models that write it, for docs and messages
    call: str
    open: str = ""
    close: str = ""
    sep: str = ""
    param: str | None = None  # None: the arguments are one JSON object («args»)
    param_sep: str = ""
    values: str = "raw"  # raw | quoted | python
    quote: str = ""
    python_scalars: bool = False  # True/False/None as Python writes them (a template's |string)
    sorted_keys: bool = False  # parameters in sorted order (Gemma 4's dictsort)
    layout: str | None = SPACED
    id_pattern: str | None = None  # «id»: `, "id": "<this regex>"` (optional in the output)
    parallel: bool = True  # several calls in one answer (False: one call per message)
    array_when_parallel: bool = False  # `json`: several calls are a JSON array
    trigger: str | None = None  # what begins the calls after free text (tool choice auto)
    prompt_header: str = ""  # what a generation prompt writes before the first call
    tags: tuple[str, ...] = ()  # markup a vocabulary may hold as control tokens
    think: tuple[str | None, str] | None = None
    think_in_prompt: bool = False
    think_marker: str | None = None  # what shows a template writes reasoning (default: the close)
    think_gap: str = ""  # what the template writes between the think close and the calls (optional)
    markers: tuple[str, ...] = field(default=(), compare=False)  # all must be in a template that writes this

    @property
    def args_key(self) -> str:  # the JSON key of the arguments, for the prompt's example
        m = re.search(r'"(\w+)": «args»', self.call)
        return m.group(1) if m else "arguments"

    @property
    def json_args(self) -> bool:
        return self.param is None


_DS_CALLS = (
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁sep｜>",
    "<｜tool▁call▁end｜>",
)
_JSON_CALL = '{"name": "«name»", "arguments": «args»}'

FAMILIES: dict[str, ToolFamily] = {
    f.name: f
    for f in (
        ToolFamily("json", "no template: OpenAI's shape", _JSON_CALL, sep=", ", layout=None, array_when_parallel=True),
        ToolFamily(
            "hermes",
            "Qwen3, Qwen2.5, Hermes 2 Pro / 3",
            "<tool_call>\n" + _JSON_CALL + "\n</tool_call>",
            sep="\n",
            trigger="<tool_call>",
            tags=("<tool_call>", "</tool_call>"),
            think=("<think>", "</think>"),
            think_gap="\n\n",
            markers=("<tool_call>",),
        ),
        ToolFamily(
            "qwen3_coder",
            "Qwen3-Coder, Qwen3.5",
            "<tool_call>\n<function=«name»>\n«args»</function>\n</tool_call>",
            sep="\n",
            param="<parameter=«key»>\n«value»\n</parameter>\n",
            python_scalars=True,
            trigger="<tool_call>",
            tags=("<tool_call>", "</tool_call>"),
            think=("<think>", "</think>"),
            think_gap="\n\n",
            markers=("<function=", "<parameter="),
        ),
        ToolFamily(
            "llama3",
            "Llama 3.1, 3.2, 3.3",
            '{"name": "«name»", "parameters": «args»}',
            sep="; ",
            markers=("<|python_tag|>",),
        ),
        ToolFamily(
            "mistral",
            "Mistral Small 3.1, Nemo",
            '{"name": "«name»", "arguments": «args»«id»}',
            open="[TOOL_CALLS]«? »[",
            close="]",
            sep=", ",
            id_pattern="[a-zA-Z0-9]{9}",
            trigger="[TOOL_CALLS]",
            tags=("[TOOL_CALLS]",),
            markers=("[TOOL_CALLS]",),
        ),
        ToolFamily(
            "harmony",
            "gpt-oss",
            " to=functions.«name»<|channel|>commentary json<|message|>«args»<|call|>",
            open="«?<|start|>assistant»",  # a new message after thinking; the generation prompt writes it first
            parallel=False,
            trigger=" to=functions.",
            prompt_header="<|start|>assistant",
            tags=("<|start|>", "<|channel|>", "<|message|>", "<|call|>", "<|end|>"),
            think=("<|channel|>analysis<|message|>", "<|end|>"),
            markers=("<|channel|>commentary",),
        ),
        ToolFamily(
            "deepseek_v3_1",
            "DeepSeek V3.1",
            "<｜tool▁call▁begin｜>«name»<｜tool▁sep｜>«args»<｜tool▁call▁end｜>",
            open="<｜tool▁calls▁begin｜>",
            close="<｜tool▁calls▁end｜>",
            trigger="<｜tool▁calls▁begin｜>",
            tags=_DS_CALLS,
            think=("<think>", "</think>"),
            think_in_prompt=True,
            markers=("<｜tool▁sep｜>",),
        ),
        ToolFamily(
            "deepseek_r1",
            "DeepSeek R1, R1-Distill",
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>«name»\n```json\n«args»\n```<｜tool▁call▁end｜>",
            open="<｜tool▁calls▁begin｜>",
            close="<｜tool▁calls▁end｜>",
            sep="\n",
            trigger="<｜tool▁calls▁begin｜>",
            tags=_DS_CALLS,
            think=("<think>", "</think>"),
            think_in_prompt=True,
            markers=("<｜tool▁sep｜>", "```json"),
        ),
        ToolFamily(
            "deepseek_v3_2",
            "DeepSeek V3.2 (DSML)",
            '\n<｜DSML｜invoke name="«name»">\n«args»\n</｜DSML｜invoke>',
            open="<｜DSML｜function_calls>",
            close="\n</｜DSML｜function_calls>",
            param='<｜DSML｜parameter name="«key»" string="«string»">«value»</｜DSML｜parameter>',
            param_sep="\n",
            trigger="<｜DSML｜function_calls>",
            think=("<think>", "</think>"),
            think_gap="\n\n",
            think_in_prompt=True,
            markers=("DSML",),
        ),
        ToolFamily(
            "kimi_k2",
            "Kimi K2 (Thinking, 0905)",
            "<|tool_call_begin|>functions.«name»:«index»<|tool_call_argument_begin|>«args»<|tool_call_end|>",
            open="<|tool_calls_section_begin|>",
            close="<|tool_calls_section_end|>",
            trigger="<|tool_calls_section_begin|>",
            tags=(
                "<|tool_calls_section_begin|>",
                "<|tool_calls_section_end|>",
                "<|tool_call_begin|>",
                "<|tool_call_argument_begin|>",
                "<|tool_call_end|>",
            ),
            think=("<think>", "</think>"),
            markers=("<|tool_calls_section_begin|>",),
        ),
        ToolFamily(
            "kimi_k3",
            "Kimi K3",
            '<|open|>call tool="«name»" index="«index»"<|sep|>«args»<|close|>call<|sep|>',
            open="<|open|>tools<|sep|>",
            close="<|close|>tools<|sep|>",
            param='<|open|>argument key="«key»" type="«type»"<|sep|>«value»<|close|>argument<|sep|>',
            trigger="<|open|>tools<|sep|>",
            tags=("<|open|>", "<|close|>", "<|sep|>"),
            think=("<|open|>think<|sep|>", "<|close|>think<|sep|>"),
            think_gap="<|open|>response<|sep|><|close|>response<|sep|>",
            think_in_prompt=True,
            think_marker="close_tag('think')",
            markers=("open_tag('call'",),
        ),
        ToolFamily(
            "glm",
            "GLM 4.5, 4.6, 4.7",
            "<tool_call>«name»«?\n»«args»</tool_call>",
            sep="\n",
            param="<arg_key>«key»</arg_key>\n<arg_value>«value»</arg_value>«?\n»",
            trigger="<tool_call>",
            tags=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
            think=("<think>", "</think>"),
            think_gap="\n",
            markers=("<arg_key>",),
        ),
        ToolFamily(
            "minimax",
            "MiniMax M2",
            '<invoke name="«name»">\n«args»</invoke>\n',
            open="<minimax:tool_call>\n",
            close="</minimax:tool_call>",
            param='<parameter name="«key»">«value»</parameter>\n',
            trigger="<minimax:tool_call>",
            tags=("<minimax:tool_call>", "</minimax:tool_call>"),
            think=("<think>", "</think>"),
            think_gap="\n\n\n",
            think_in_prompt=True,
            markers=("<minimax:tool_call>",),
        ),
        ToolFamily(
            "seed_oss",
            "ByteDance Seed-OSS",
            "<seed:tool_call>\n<function=«name»>\n«args»</function>\n</seed:tool_call>",
            sep="\n",
            param="<parameter=«key»>«value»</parameter>\n",
            python_scalars=True,
            trigger="<seed:tool_call>",
            tags=("<seed:tool_call>", "</seed:tool_call>"),
            think=("<seed:think>", "</seed:think>"),
            think_gap="\n",
            markers=("<seed:tool_call>",),
        ),
        ToolFamily(
            "command_r7b",
            "Cohere Command R7B",
            '{"tool_call_id": "«index»", "tool_name": "«name»", "parameters": «args»}',
            open="<|START_ACTION|>[\n    ",
            close="\n]<|END_ACTION|>",
            sep=",\n    ",
            trigger="<|START_ACTION|>",
            tags=("<|START_ACTION|>", "<|END_ACTION|>"),
            think=("<|START_THINKING|>", "<|END_THINKING|>"),
            markers=("<|START_ACTION|>",),
        ),
        ToolFamily(
            "phi4_mini",
            "Phi-4-mini",
            "<|tool_call|>" + _JSON_CALL + "<|/tool_call|>",
            trigger="<|tool_call|>",
            tags=("<|tool_call|>", "<|/tool_call|>"),
            markers=("<|tool_call|>",),
        ),
        ToolFamily(
            "gemma4",
            "Gemma 4",
            "<|tool_call>call:«name»{«args»}<tool_call|>",
            param="«key»:«value»",
            param_sep=",",
            values="quoted",
            quote='<|"|>',
            sorted_keys=True,
            trigger="<|tool_call>",
            tags=("<|tool_call>", "<tool_call|>", '<|"|>'),
            think=("<|channel>thought\n", "<channel|>"),
            markers=("<|tool_call>call:",),
        ),
        ToolFamily(
            "nemotron",
            "NVIDIA Nemotron Nano v2, Llama-3.3 Nemotron Super",
            _JSON_CALL,
            open="<TOOLCALL>[",
            close="]</TOOLCALL>",
            sep=", ",
            trigger="<TOOLCALL>",
            tags=("<TOOLCALL>", "</TOOLCALL>"),
            think=("<think>", "</think>"),
            markers=("<TOOLCALL>",),
        ),
        ToolFamily(
            "apriel",
            "ServiceNow Apriel 1.5",
            _JSON_CALL,
            open="<tool_calls>[",
            close="]</tool_calls>",
            sep=", ",
            trigger="<tool_calls>",
            think=(None, "[BEGIN FINAL RESPONSE]"),
            markers=("<tool_calls>",),
        ),
        ToolFamily(
            "lfm2",
            "Liquid LFM2 (llama.cpp's JSON template)",
            '{"name": "«name»", "arguments": «args»«id»}',
            open="<|tool_call_start|>[",
            close="]<|tool_call_end|>",
            sep=", ",
            id_pattern="[a-zA-Z0-9_.:-]{1,64}",
            trigger="<|tool_call_start|>",
            tags=("<|tool_call_start|>", "<|tool_call_end|>"),
            markers=("<|tool_call_start|>", "tojson"),
        ),
        ToolFamily(
            "lfm2_pythonic",
            "Liquid LFM2, LFM2.5 (vendor: Python calls)",
            "«name»(«args»)",
            open="<|tool_call_start|>[",
            close="]<|tool_call_end|>",
            sep=", ",
            param="«key»=«value»",
            param_sep=", ",
            values="python",
            quote="'",
            python_scalars=True,
            trigger="<|tool_call_start|>",
            tags=("<|tool_call_start|>", "<|tool_call_end|>"),
            think=("<think>", "</think>"),
            markers=("<|tool_call_start|>", '"("'),
        ),
    )
}
FAMILY_NAMES = tuple(FAMILIES)

# the order detection tries (the most specific markup first: Qwen3-Coder's <tool_call>
# holds <function=, GLM's <arg_key>, Hermes' is plain JSON)
_DETECT_ORDER = (
    "deepseek_v3_2",
    "deepseek_r1",
    "deepseek_v3_1",
    "kimi_k2",
    "kimi_k3",
    "minimax",
    "seed_oss",
    "glm",
    "qwen3_coder",
    "command_r7b",
    "phi4_mini",
    "gemma4",
    "nemotron",
    "apriel",
    "lfm2_pythonic",
    "lfm2",
    "harmony",
    "hermes",
    "mistral",
    "llama3",
)
_LLAMA3_JSON = {'"parameters"', "ipython"}  # Llama 3.2's JSON calls (no <|python_tag|>)
_WRITES_CALLS = re.compile(r"tool_calls|tool_call\b|\.function\b|function\[")


@dataclass(frozen=True)
class Detection:
    """What a chat template says about tool calls: the family (None: it writes none, or
    none ministruct reads), and why."""

    family: ToolFamily | None
    note: str
    writes_calls: bool


def detect_family(template: str | None) -> Detection:
    """The family whose markup a chat template writes. Whether it writes tool calls at all is
    rendered (a call and no call, diffed, as llama.cpp does); which markup, by the markers
    each family's templates hold. A template that renders calls in a markup of no known
    family has `family` None and `writes_calls` True: the caller refuses it."""
    from ministruct.grammar.chat_template import TemplateError, writes_tool_calls

    if not template:
        return Detection(None, "no chat template", False)
    try:
        writes = writes_tool_calls(template)
    except TemplateError:
        writes = None
    if writes is False:
        return Detection(None, "the template writes no tool calls (rendered with and without one)", False)
    for name in _DETECT_ORDER:
        fam = FAMILIES[name]
        found = all(m in template for m in fam.markers) or (name == "llama3" and _LLAMA3_JSON <= set(_words(template)))
        if fam.markers and found:
            return Detection(fam, f"the template writes {fam.name}'s markup ({', '.join(fam.markers)})", True)
    if writes or (writes is None and _WRITES_CALLS.search(template) and "tool_calls" in template):
        return Detection(None, "the template renders tool calls in a markup ministruct cannot read", True)
    return Detection(None, "the template has no tool-call markup", False)


def _words(template: str) -> list[str]:
    return [w for w in _LLAMA3_JSON if w in template]


def think_opens_in_prompt(template: str | None, open_: str | None) -> bool:
    """Whether the template's generation prompt opens the thinking (ends with `open_`)."""
    from ministruct.grammar.chat_template import generation_prompt

    if not template or not open_:
        return False
    prompt = generation_prompt(template)
    return prompt is not None and prompt.rstrip().endswith(open_.strip())


def think_of_template(template: str | None) -> tuple[ToolFamily | None, tuple[str | None, str] | None]:
    """The reasoning pair a template writes: its tool family's, when the template writes
    that family's think tags (Qwen3-Coder shares Qwen3.5's call markup, not its thinking),
    or, for templates without tools, the first family whose think tags it writes."""
    if not template:
        return None, None

    def writes_think(f: ToolFamily) -> bool:
        return f.think is not None and (f.think_marker or f.think[1].strip()) in template

    fam = detect_family(template).family
    if fam is not None and writes_think(fam):
        return fam, fam.think
    for f in FAMILIES.values():
        if writes_think(f) and (f.think[0] is None or f.think[0].strip() in template or f.think_marker):  # type: ignore[index]
            return f, f.think
    return None, None


__all__ = [
    "FAMILIES",
    "FAMILY_NAMES",
    "SPACED",
    "Detection",
    "ToolFamily",
    "detect_family",
    "think_of_template",
    "think_opens_in_prompt",
]
