"""Where the calls begin when the trigger is one control token (it writes no text): the
generated token ids say, not the text, since the free text may hold the trigger's text
as plain text. Generations are walked through the engine on a hand-made vocabulary."""

from __future__ import annotations

import json

from ministruct.decode.loop import Generation
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.tools import read_calls
from ministruct.jobs.job import marked_answer

TOOLS = [{"type": "function", "function": {"name": "g"}}]
CALL = '\n{"name": "g", "arguments": {}}\n</tool_call>'
TEXTS = ["Hi ", "<tool_call>", " as text. ", CALL, "</think>", "hm "]


def vocab() -> Vocabulary:
    tokens = [t.encode() for t in TEXTS] + [b"", b""]
    n = len(TEXTS)
    return Vocabulary.from_bytes(tokens, eog_ids=[n], control_ids=[n + 1], control_text={n + 1: "<tool_call>"})


def generate(c: Constraint, v: Vocabulary, ids: list[int]) -> tuple[Generation, Matcher]:
    m = Matcher(compile_grammar(c.grammar, v, use_cache=False))
    for t in ids:
        assert m.mask()[t], (t, v.piece(t))
        m.advance(t)
    assert m.is_accepting()
    return Generation(ids, v.decode(ids), "eog", True, phase_state=m.phase_state), m


def test_the_calls_begin_after_the_trigger_token_not_its_text():
    v = vocab()
    c = Constraint.from_tools(TOOLS, choice="auto", format="hermes").with_control_tokens(
        lambda t: v.id_of_control(t) is not None
    )
    ctrl = v.id_of_control("<tool_call>")
    gen, m = generate(c, v, [0, 1, 2, ctrl, 3])  # "Hi <tool_call> as text. " then the token, then the call
    marked = marked_answer(c.tools, gen, v)
    assert marked.text == "Hi <tool_call> as text. <tool_call>" + CALL  # the token written out
    assert marked.calls_at == len("Hi <tool_call> as text. <tool_call>") and m.phase == "answer"
    read = read_calls(c.tools, marked.text, calls_at=marked.calls_at)
    assert read.error is None and read.content == "Hi <tool_call> as text. "
    assert [(x.name, x.arguments) for x in read.calls] == [("g", {})]
    name_at = marked.output_offset(read.calls[0].name_offset)
    assert gen.text[name_at : name_at + 1] == "g"  # the name's place in the output, without the token
    free, _ = generate(c, v, [0, 1, 2])  # the trigger's text alone is free text
    free_marked = marked_answer(c.tools, free, v)
    assert free_marked.calls_at is None and read_calls(c.tools, free_marked.text).calls == []


def test_thinking_first_then_auto_the_calls_after_the_thinking():
    v = vocab()
    tools = Constraint.from_tools(TOOLS, choice="auto", format="hermes").with_control_tokens(
        lambda t: v.id_of_control(t) is not None
    )
    c = tools.think_first(close="</think>")
    ctrl = v.id_of_control("<tool_call>")
    gen, m = generate(c, v, [5, 1, 4, 0, ctrl, 3])  # "hm <tool_call></think>Hi " then the call
    start = gen.phase_state.answer_start
    assert gen.output[:start] == b"hm <tool_call></think>"
    marked = marked_answer(tools.tools, gen, v, start)
    read = read_calls(tools.tools, marked.text, calls_at=marked.calls_at)
    assert read.content == "Hi " and json.loads(read.tool_calls()[0]["function"]["arguments"]) == {}
