"""Tool choice `auto` on the free-text-then-constraint combinator, against an oracle written
from the formats' definitions alone (plain string logic: the free text ends at the first
trigger, `str.find`; the calls are a hand-listed set of call texts): on a small hand-made
vocabulary, at every step of hypothesis-driven walks, the engine's legal set is exactly
the set of tokens the oracle allows, end-of-generation included; `read_calls` reads every
complete output back, with the oracle's free text and calls. A trigger that is one control
token of the vocabulary (Qwen-style `<tool_call>`) is that token in the grammar."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.check.tool_calls import ToolCallChecker
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.ir import TokenRef, walk
from ministruct.grammar.tools import read_calls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"a": {"enum": [1, 2]}},
                "required": ["a"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "g"}},
]
ARGS = [("f", {"a": 1}), ("f", {"a": 2}), ("g", {})]
CTRL = "\ue000"  # the oracle's stand-in for the control token <tool_call>

PIECES = [
    "a", " ", "x", "<", ">", "[", "]", "{", "}", "\n", ",", ";", ":", '"', "1", "2", "f", "g", "t",
    "<tool_call>", "<tool_", "call>", "ool_call>", "</tool_call>", "\n</tool_call>", "\n<tool_call>\n",
    "[TOOL_CALLS]", "[TOOL_", "CALLS]", '{"name": ', '"f", ', '"g", ', '"arguments": ', '"parameters": ',
    '{"a":', "{}", "}}", ", ", "; ", "a<", ">\n", '"name"',
]  # fmt: skip


def call_text(name: str, args: dict, key: str, sep: tuple[str, str] = (", ", ": ")) -> str:
    return '{"name": ' + json.dumps(name) + f', "{key}": ' + json.dumps(args, separators=sep) + "}"


@dataclass
class Oracle:
    """A format's `auto` language: free text up to the first trigger (or, without one, a text
    not starting with `first`), else calls: `calls`, a regular expression (the `regex`
    package's partial matching says whether a text can still become one)."""

    trigger: str | None
    first: str
    calls: str

    def split(self, s: str) -> int | None:
        """Where the calls start in `s` (None: all free text)."""
        if self.trigger is not None:
            i = s.find(self.trigger)
            return None if i < 0 else i
        return 0 if s.startswith(self.first) else None

    def allows(self, s: str, complete: bool) -> bool:
        i = self.split(s)
        if i is None:
            return True  # free text: complete, and every continuation of it is a prefix of some text
        return regex.fullmatch(self.calls, s[i:], partial=not complete) is not None


def oracle(fmt: str, parallel: bool, trigger_token: bool = False) -> Oracle:
    key = "parameters" if fmt == "llama3" else "arguments"
    sep = (", ", ": ")  # json: SchemaOptions' default (spaced); the others as their templates write it
    calls = [call_text(n, a, key, sep) for n, a in ARGS]
    one = "(?:" + "|".join(regex.escape(c) for c in calls) + ")"
    if fmt == "hermes":
        tag = regex.escape(CTRL if trigger_token else "<tool_call>")
        block = f"{tag}\n{one}\n</tool_call>"
        return Oracle(CTRL if trigger_token else "<tool_call>", "<", block + (f"(?:\n{block})*" if parallel else ""))
    if fmt == "mistral":
        with_id = "(?:" + "|".join(regex.escape(c[:-1]) + ', "id": "[a-zA-Z0-9]{9}"\\}' for c in calls) + ")"
        item = f"(?:{one}|{with_id})"
        return Oracle(
            "[TOOL_CALLS]", "[", f"\\[TOOL_CALLS\\] ?\\[{item}" + (f"(?:, {item})*" if parallel else "") + "\\]"
        )
    if fmt == "json" and parallel:
        return Oracle(None, "[", f"\\[{one}(?:, {one})*\\]")
    return Oracle(None, "{", one + (f"(?:; {one})*" if parallel and fmt == "llama3" else ""))


def vocab(control: bool = False) -> Vocabulary:
    tokens = [p.encode() for p in PIECES] + [b""]
    n = len(tokens) - 1
    if not control:
        return Vocabulary.from_bytes(tokens, eog_ids=[n])
    return Vocabulary.from_bytes(tokens + [b""], eog_ids=[n], control_ids=[n + 1], control_text={n + 1: "<tool_call>"})


def walk_and_compare(c: Constraint, o: Oracle, v: Vocabulary, choices: list[int]) -> list[str]:
    """Walk the compiled grammar, choosing legal tokens by `choices`; at each step compare the
    whole legal set with the oracle's. The complete outputs met on the way (oracle texts)."""
    m = Matcher(compile_grammar(c.grammar, v, use_cache=False))
    eog = next(iter(v.eog_ids))
    ctrl = v.id_of_control("<tool_call>")
    text, complete = "", []
    for pick in choices + [0]:
        mask = m.mask()
        want = np.zeros_like(mask)
        for t in range(len(PIECES)):
            want[t] = o.allows(text + PIECES[t], complete=False)
        want[eog] = o.allows(text, complete=True)
        if ctrl is not None:
            want[ctrl] = o.allows(text + CTRL, complete=False)
        diff = np.flatnonzero(mask[: len(want)] != want)
        assert not len(diff), f"after {text!r}: engine and oracle differ on {[v.piece(int(t)) for t in diff]}"
        if want[eog]:
            complete.append(text)
        legal = [int(t) for t in np.flatnonzero(want) if t != eog]
        if not legal or pick % 31 == 30:
            break
        piece = {t: CTRL if t == ctrl else PIECES[t] for t in legal}
        into_calls = [t for t in legal if o.split(text + piece[t]) is not None]  # most walks go on into calls
        if into_calls and pick % 4 in (1, 2):
            longest = max(len(piece[t]) for t in into_calls)
            pool = [t for t in into_calls if len(piece[t]) == longest]
        else:
            pool = into_calls if into_calls and pick % 4 == 3 else legal
        t = pool[pick % len(pool)]
        m.advance(t)
        text += piece[t]
    return complete


def check_reads_back(c: Constraint, o: Oracle, text: str) -> None:
    """read_calls gives the oracle's free text and calls, and check --tools accepts it."""
    at = o.split(text)
    written = text.replace(CTRL, "<tool_call>")  # the record's text writes the control token out
    calls_at = at + len("<tool_call>") if at is not None and CTRL in text else None
    read = read_calls(c.tools, written, calls_at=calls_at)
    assert read.error is None, (text, read.error)
    if at is None:
        assert read.content == text and read.calls == []
        return
    assert read.content == (text[:at] or None)
    rest = text[at:]
    names = [(call.name, call.arguments) for call in read.calls]
    want = [(n, a) for n, a in ARGS for _ in range(rest.count(call_text(n, a, c.tools.format.args_key)))]
    assert sorted(names, key=repr) == sorted(want, key=repr) and names
    if CTRL not in text:
        assert ToolCallChecker(c.tools).check(written).accepted


CASES = [(f, p) for f in ("json", "hermes", "mistral", "llama3") for p in (False, True)]


@pytest.mark.parametrize("fmt,parallel", CASES)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(choices=st.lists(st.integers(0, 10**6), max_size=40))
def test_auto_legal_sets_equal_the_oracle_and_read_back(fmt, parallel, choices):
    c = Constraint.from_tools(TOOLS, choice="auto", format=fmt, parallel=parallel)
    o = oracle(fmt, parallel)
    for text in walk_and_compare(c, o, vocab(), choices):
        check_reads_back(c, o, text)


@settings(max_examples=60, deadline=None)
@given(choices=st.lists(st.integers(0, 10**6), max_size=40), parallel=st.booleans())
def test_a_control_token_trigger_is_that_token(choices, parallel):
    v = vocab(control=True)
    plain = Constraint.from_tools(TOOLS, choice="auto", format="hermes", parallel=parallel)
    c = plain.with_control_tokens(lambda text: v.id_of_control(text) is not None)
    assert c.tools.control == {"<tool_call>"} and c.grammar.boundary.close == TokenRef(name="<tool_call>")
    assert any(isinstance(e, TokenRef) for r in c.grammar.rules.values() for e in walk(r))
    o = oracle("hermes", parallel, trigger_token=True)
    for text in walk_and_compare(c, o, v, choices):
        check_reads_back(c, o, text)


def test_the_text_trigger_in_free_text_does_not_start_calls_when_the_trigger_is_a_token():
    v = vocab(control=True)
    c = Constraint.from_tools(TOOLS, choice="auto", format="hermes").with_control_tokens(
        lambda text: v.id_of_control(text) is not None
    )
    o = oracle("hermes", False, trigger_token=True)
    assert o.allows("say <tool_call> as text", complete=True)
    read = read_calls(c.tools, "say <tool_call> as text")
    assert read.content == "say <tool_call> as text" and read.calls == [] and read.error is None
    # the record's text writes the control token out: plain-text <tool_call>, then the token
    text = "see <tool_call><tool_call>\n" + call_text("g", {}, "arguments", (", ", ": ")) + "\n</tool_call>"
    read = read_calls(c.tools, text, calls_at=len("see <tool_call><tool_call>"))
    assert read.content == "see <tool_call>" and [x.name for x in read.calls] == ["g"]


def test_auto_is_one_boundary_and_thinking_first_keeps_it_one():
    hermes = Constraint.from_tools(TOOLS, choice="auto", format="hermes")
    assert hermes.grammar.boundary.may_end_in_free_text and hermes.grammar.boundary.close == "<tool_call>"
    assert hermes.boundary is None  # the tools' free text is no thinking
    assert Constraint.from_tools(TOOLS, choice="auto", format="json").grammar.boundary is None
    thinking = hermes.think_first(close="</think>", open="<think>")
    assert thinking.boundary.close == "</think>"
    from ministruct.engine.automaton import accepts

    one = "<tool_call>\n" + call_text("g", {}, "arguments") + "\n</tool_call>"
    assert accepts(thinking.grammar, "hm</think>Sure." + one)
    assert accepts(thinking.grammar, "hm</think>no call needed")
    assert not accepts(thinking.grammar, "hm</think>x<tool_call>\nnope")


def test_json_parallel_auto_reads_a_brace_as_free_text():
    c = Constraint.from_tools(TOOLS, choice="auto", format="json", parallel=True)
    from ministruct.engine.automaton import accepts

    text = '{"name": "g", "arguments": {}}'
    assert accepts(c.grammar, text)  # with parallel calls the array starts a call, a lone object is text
    read = read_calls(c.tools, text)
    assert read.calls == [] and read.content == text and read.error is None
