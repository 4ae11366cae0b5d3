"""Constraint.from_tools: the grammar of tool calls, checked against independent oracles
(Python's `in` for the free text of `auto`, `jsonschema` for every call a random walk of
the compiled grammar writes, `json` for reading calls back)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from ministruct.check.grammar import check_text
from ministruct.check.tool_calls import ToolCallChecker
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import SchemaError, UsageError
from ministruct.grammar.constraint import Constraint, load_constraint
from ministruct.grammar.tool_text import write_calls
from ministruct.grammar.tools import FORMAT_NAMES, format_for_template, read_calls

REPO = Path(__file__).resolve().parents[2]
EVERYDAY = REPO / "samples" / "tools" / "everyday.json"
TOOLS = json.loads(EVERYDAY.read_text())
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def call(name: str, args: dict, key: str = "arguments", sep: tuple[str, str] = (", ", ": ")) -> str:
    return '{"name": ' + json.dumps(name) + f', "{key}": ' + json.dumps(args, separators=sep) + "}"


def accepts(c: Constraint, text: str) -> bool:
    return check_text(c.grammar, text).accepted


def test_names_sharing_a_prefix_are_exact():
    c = Constraint.from_tools(TOOLS, choice="required")
    assert accepts(c, call("get_weather", {"city": "Paris"}))
    assert accepts(c, call("get_weather_forecast", {"city": "Paris", "days": 3}))
    assert not accepts(c, call("get_weather", {"city": "Paris", "days": 3}))  # forecast's arguments
    assert not accepts(c, call("get_weather_forecast", {"city": "Paris"}))  # days is required
    assert not accepts(c, call("get_weather_fore", {"city": "Paris"}))
    assert not accepts(c, call("get_weathe", {"city": "Paris"}))


def test_each_choice_mode():
    weather = call("get_weather", {"city": "Oslo"})
    mail = call("send_email", {"to": "a@example.com", "subject": "Hi", "body": ""})
    required = Constraint.from_tools(TOOLS, choice="required")
    named = Constraint.from_tools(TOOLS, choice="send_email")
    none = Constraint.from_tools(TOOLS, choice="none")
    auto = Constraint.from_tools(TOOLS, choice="auto")
    assert accepts(required, weather) and accepts(required, mail) and not accepts(required, "It is sunny.")
    assert accepts(named, mail) and not accepts(named, weather)
    assert accepts(none, "It is sunny.") and accepts(none, weather) and accepts(none, "")
    assert read_calls(none.tools, weather).calls == []  # with none, JSON is just text
    assert accepts(auto, weather) and accepts(auto, "It is sunny.") and accepts(auto, "")
    assert not accepts(auto, '{"name": "nope"}')  # starts like a call: must be one
    openai = {"type": "function", "function": {"name": "calculator"}}
    assert Constraint.from_tools(TOOLS, choice=openai).tools.choice == "calculator"


def test_auto_with_a_trigger_allows_text_then_calls():
    auto = Constraint.from_tools(TOOLS, choice="auto", format="hermes", parallel=True)
    one = "<tool_call>\n" + call("calculator", {"expression": "1+2"}, sep=(", ", ": ")) + "\n</tool_call>"
    assert accepts(auto, "Let me compute that.\n" + one)
    assert accepts(auto, one + "\n" + one)
    assert accepts(auto, "No tool needed: a < b and <tool_cal is fine.")
    assert not accepts(auto, "text <tool_call>\nnot json\n</tool_call>")
    assert not accepts(auto, "text " + one + " and more text")
    read = read_calls(auto.tools, "Sure.\n" + one + "\n" + one)
    assert read.content == "Sure.\n" and [c.name for c in read.calls] == ["calculator", "calculator"]


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_parallel_calls_only_when_asked(fmt):
    single = Constraint.from_tools(TOOLS, choice="required", format=fmt)
    multi = Constraint.from_tools(TOOLS, choice="required", format=fmt, parallel=True)
    f = multi.tools.format
    calls = [("calculator", {"expression": "1"}), ("web_search", {"query": "x"})]
    one = write_calls(f, calls[:1])
    two = write_calls(f, calls)
    if not f.parallel:  # one call per message (gpt-oss)
        assert accepts(multi, one) and not accepts(multi, one + one)
        return
    assert accepts(single, one) and not accepts(single, two)
    assert accepts(multi, two)
    assert [c.name for c in read_calls(multi.tools, two).calls] == ["calculator", "web_search"]
    checker = ToolCallChecker(multi.tools)
    assert checker.check(two).accepted
    assert not ToolCallChecker(single.tools).check(two).accepted


def test_tool_calls_in_openai_shape():
    c = Constraint.from_tools(TOOLS, choice="required")
    text = call("get_weather", {"city": "Zürich", "unit": "celsius"})
    (tc,) = read_calls(c.tools, text).tool_calls(salt="r1")
    assert tc["type"] == "function" and tc["id"].startswith("call_") and len(tc["id"]) == 29
    assert tc["function"]["name"] == "get_weather"
    assert json.loads(tc["function"]["arguments"]) == {"city": "Zürich", "unit": "celsius"}


def test_arguments_holding_the_envelope_text_read_back_whole():
    tools = [{"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}]
    c = Constraint.from_tools(tools, choice="required", format="hermes", options=None)
    inner = {"text": '\n</tool_call> {"name": "x"}', "who": {"name": "Bob"}}
    text = "<tool_call>\n" + call("note", inner, sep=(", ", ": ")) + "\n</tool_call>"
    (got,) = read_calls(c.tools, text).calls
    assert got.arguments == inner and text[got.name_offset : got.name_offset + 4] == "note"


def byte_vocab() -> Vocabulary:
    return Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b""], eog_ids=[256])


def random_outputs(c: Constraint, n: int, seed: int) -> list[str]:
    """Texts a seeded random walk over single-byte tokens writes through the compiled grammar,
    ending (at EOG) where the grammar allows it with probability 1/4 per step, and closing a
    string where it may with probability 1/5 (after 200 bytes, closing characters half the
    time, so the walks end)."""
    compiled = compile_grammar(c.grammar, byte_vocab(), use_cache=False)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        m, data = Matcher(compiled), bytearray()
        for _ in range(3000):
            legal = np.flatnonzero(m.mask())
            if 256 in legal and (len(legal) == 1 or rng.random() < 0.25):
                break
            text_ids = [int(t) for t in legal if t != 256]
            if 34 in text_ids and len(text_ids) > 1 and rng.random() < 0.2:
                text_ids = [34]
            closing = [t for t in text_ids if t in b'"}]>@.']  # long walks head for an end
            if len(data) > 200 and closing and rng.random() < 0.5:
                text_ids = closing
            # prefer printable ASCII so strings stay short and readable
            nice = [t for t in text_ids if 32 <= t < 127 or t == 10] or text_ids
            t = rng.choice(nice)
            m.advance(t)
            data.append(t)
        if m.is_accepting():
            out.append(data.decode("utf-8"))
    return out


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
def test_every_walked_call_validates_with_jsonschema(fmt):
    c = Constraint.from_tools(TOOLS, choice="required", format=fmt, parallel=True)
    texts = random_outputs(c, 12, seed=len(fmt))
    assert len(texts) >= 8
    for text in texts:
        read = read_calls(c.tools, text)
        assert read.error is None and read.calls, text
        for tc in read.tool_calls():
            fn = tc["function"]
            jsonschema.validate(
                json.loads(fn["arguments"]), SCHEMAS[fn["name"]], format_checker=jsonschema.FormatChecker()
            )


def test_bad_tool_lists_name_the_place():
    with pytest.raises(SchemaError, match="at /1/function/name"):
        Constraint.from_tools([TOOLS[0], {"type": "function", "function": {"name": "has space"}}])
    with pytest.raises(SchemaError, match="at /1/function/name: the name get_weather is given twice"):
        Constraint.from_tools([TOOLS[0], TOOLS[0]])
    with pytest.raises(SchemaError, match="at /0/type"):
        Constraint.from_tools([{"type": "retrieval"}])
    with pytest.raises(SchemaError, match="tool get_weather.*at /properties/city"):
        bad = json.loads(json.dumps(TOOLS[0]))
        bad["function"]["parameters"]["properties"]["city"]["minLength"] = "one"
        Constraint.from_tools([bad])
    with pytest.raises(UsageError, match="tool_choice 'fly'"):
        Constraint.from_tools(TOOLS, choice="fly")
    with pytest.raises(UsageError, match="tool format"):
        Constraint.from_tools(TOOLS, format="xml")
    with pytest.raises(UsageError, match="only applies to `tools`"):
        load_constraint(regex="a", tool_choice="none")


def test_a_function_without_parameters_takes_an_empty_object():
    c = Constraint.from_tools([{"type": "function", "function": {"name": "now"}}], choice="required")
    assert accepts(c, '{"name": "now", "arguments": {}}')
    assert not accepts(c, '{"name": "now", "arguments": {"x":1}}')


def test_one_tool_given_alone_is_a_list_of_one():
    for alone in (TOOLS[0], TOOLS[0]["function"]):
        (tool,) = Constraint.from_tools(alone, choice="required").tools.tools
        assert tool.name == TOOLS[0]["function"]["name"]


def test_parameters_that_are_not_an_object_are_refused_by_place():
    fn = {"name": "shout", "parameters": {"type": "string"}}
    with pytest.raises(SchemaError, match='at /0/function/parameters/type: .*type "object".*not type "string"'):
        Constraint.from_tools([{"type": "function", "function": fn}])
    ok = {"name": "shout", "parameters": {"type": ["object", "null"], "properties": {}}}
    Constraint.from_tools([ok])


def test_format_from_the_chat_template():
    calls = "{% for m in messages %}{% for tc in m.tool_calls or [] %}OPEN{{ tc.function | tojson }}{% endfor %}{% endfor %}"
    assert format_for_template(None) == "json"
    assert format_for_template("{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}") == "json"
    assert format_for_template(calls.replace("OPEN", "<tool_call>\\n")) == "hermes"
    assert format_for_template(calls.replace("OPEN", "[TOOL_CALLS][")) == "mistral"
    assert format_for_template(calls.replace("OPEN", "<|python_tag|>")) == "llama3"
    assert format_for_template("{{ '<tool_call>' }}") == "json"  # it names the markup, but writes no call
    with pytest.raises(UsageError, match="cannot be read"):
        format_for_template(calls.replace("OPEN", "CALL:"))
    c = Constraint.from_tools(TOOLS, format="auto", chat_template=calls.replace("OPEN", "<tool_call>"))
    assert c.tools.format.name == "hermes"


def test_a_call_whose_arguments_hold_nan_is_rejected():
    # check --tools said "ok" to {"q": NaN}, which is not JSON
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"properties": {"q": {"type": "number"}}}}}]
    checker = ToolCallChecker(Constraint.from_tools(tools, choice="required").tools)
    assert not checker.check('{"name": "f", "arguments": {"q": NaN}}').accepted
    assert checker.check('{"name": "f", "arguments": {"q": 1.5}}').accepted
    calls = [{"type": "function", "function": {"name": "f", "arguments": '{"q": Infinity}'}}]
    assert not checker.check_calls(calls).accepted
