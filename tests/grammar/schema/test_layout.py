"""The JSON layout (SchemaOptions.whitespace): the default writes what the models write
(`json.dumps`' `", "` and `": "`), and no layout lets whitespace run on unbounded.

The longest run of whitespace a grammar allows is measured on its own automaton: from
every point outside a string of sampled documents, breadth-first over the four JSON
whitespace bytes. A generation with a model that prefers whitespace above everything
must still end, complete and valid, within its token budget."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from grammar.helpers import sample_strings
from ministruct.decode.loop import generate
from ministruct.decode.sampling import SamplingParams
from ministruct.engine.automaton import Automaton, accepts
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.export import llama_gbnf
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar
from ministruct.grammar.tool_grammar import tools_grammar
from ministruct.grammar.tools import ToolSpec, parse_tools

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
WS = b" \t\n\r"
HANDMADE = {
    "any-object": {"type": "object"},
    "nested": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "array"}}},
            },
            "const": {"const": {"k": [1, {"z": None}], "e": {}}},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["items", "const"],
    },
    "any-of": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object", "properties": {"a": {}}}]},
}


def _schemas() -> dict[str, dict]:
    files = sorted(SAMPLES.glob("*.json")) + sorted((SAMPLES / "study").glob("*.json"))
    return {**{p.name: json.loads(p.read_text()) for p in files}, **HANDMADE}


SCHEMAS = _schemas()


def outside_strings(text: bytes) -> list[int]:
    """The offsets of `text` (a JSON text or its prefix) that lie outside every string."""
    cuts, in_string, escaped = [], False, False
    for i, c in enumerate(text):
        if not in_string:
            cuts.append(i)
        if in_string and escaped:
            escaped = False
        elif in_string and c == 0x5C:
            escaped = True
        elif c == 0x22:
            in_string = not in_string
    return cuts + [len(text)]


def longest_run(auto: Automaton, config, limit: int = 80) -> int:
    """The most whitespace bytes in a row the automaton takes from `config` (at most `limit`)."""
    frontier, n = {config}, 0
    while n < limit:
        frontier = {d for c in frontier for b in WS if (d := auto.step_bytes(c, bytes([b])))}
        if not frontier:
            return n
        n += 1
    return n


def longest_whitespace(schema: dict, whitespace: str, count: int = 12) -> int:
    """The longest whitespace run the grammar allows at any point outside a string of
    `count` sampled documents."""
    grammar = schema_to_grammar(schema, whitespace=whitespace)
    auto = Automaton(grammar)
    most = 0
    for text in sample_strings(grammar, random.Random(3), count=count):
        data = text.encode()
        assert accepts(grammar, data), text
        config = auto.initial
        at = 0
        for cut in outside_strings(data):
            config = auto.step_bytes(config, data[at:cut])
            at = cut
            most = max(most, longest_run(auto, config))
    return most


def layout(text: str) -> str:
    """The text with every string and scalar reduced to one character: its layout."""
    return re.sub(r'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null', "0", text)


def is_dumps_layout(text: str) -> bool:
    """One space after every `:` and `,` outside strings, and no other whitespace there:
    the layout `json.dumps` writes."""
    shape = layout(text)
    return (
        all(shape[i + 1 : i + 2] == " " for i, c in enumerate(shape) if c in ":,")
        and not any(c in shape for c in "\t\n\r")
        and shape.count(" ") == shape.count(":") + shape.count(",")
    )


def test_the_default_is_json_dumps_layout():
    assert SchemaOptions().whitespace == "spaced"
    for name, schema in SCHEMAS.items():
        grammar = schema_to_grammar(schema)
        for text in sample_strings(grammar, random.Random(5), count=8):
            assert is_dumps_layout(text), (name, text)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_default_never_admits_more_than_one_space_in_a_row(name):
    assert longest_whitespace(SCHEMAS[name], "spaced") <= 1
    assert longest_whitespace(SCHEMAS[name], "compact") == 0
    assert longest_whitespace(SCHEMAS[name], "flexible") <= 20


def test_the_runs_are_measured_where_they_are_long():
    """The measure is not blind: it finds flexible's 20 and the space after a colon."""
    schema = SCHEMAS["nested"]
    assert longest_whitespace(schema, "spaced") == 1
    assert longest_whitespace(schema, "flexible") == 20


# ---------------------------------------------------------------- a model that prefers whitespace

TOKENS = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"a", b"b", b"x", b"1", b"7", b'"a"', b'"b"', b": ", b", "]
SPACES = [b" ", b"  ", b"\n", b"\t", b"    ", b" \n  "]
VOCAB = Vocabulary.from_bytes(TOKENS + SPACES + [b""], eog_ids=[len(TOKENS) + len(SPACES)], control_text={})


class WhitespaceModel:
    """Logits: every whitespace-only token far above everything else, the longest highest."""

    vocabulary = VOCAB
    n_ctx = 4096

    def prefill(self, tokens) -> int:
        return 0

    def eval(self, tokens) -> None:
        pass

    def logits(self) -> np.ndarray:
        z = np.zeros(len(VOCAB.tokens), np.float32)
        for i, t in enumerate(SPACES):
            z[len(TOKENS) + i] = 10.0 + len(t)
        return z


GENERATED = {
    "type": "object",
    "properties": {
        "a": {"type": "array", "items": {"type": "integer"}, "minItems": 2},
        "b": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    },
    "required": ["a", "b"],
}


@pytest.mark.parametrize("whitespace", ["spaced", "flexible"])
def test_a_model_that_prefers_whitespace_ends_within_the_budget(whitespace):
    grammar = schema_to_grammar(GENERATED, whitespace=whitespace)
    matcher = Matcher(compile_grammar(grammar, VOCAB, use_cache=False))
    dec = generate(WhitespaceModel(), [0], matcher, SamplingParams(temperature=0.0), max_tokens=60)
    steps = list(dec)
    res = dec.result
    assert res.complete, res  # complete when the budget ran out, or before
    assert len(steps) <= 60 and res.n_tokens <= 60
    assert Draft202012Validator(GENERATED).is_valid(json.loads(res.output))
    text = res.output  # no strings in this schema: every whitespace byte is layout
    run, most = 0, 0
    for c in text:
        run = run + 1 if c in WS else 0
        most = max(most, run)
    if whitespace == "spaced":
        assert is_dumps_layout(text.decode()) and most == 1
    else:
        assert 1 < most <= 20  # the model took all the room flexible gives: bounded, and it still closed


# ---------------------------------------------------------------- every JSON the project writes


def test_tool_call_arguments_and_the_fleets_grammar_use_the_default():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                },
            },
        }
    ]
    call = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}'
    grammar = tools_grammar(ToolSpec(parse_tools(tools), choice="required"))
    assert accepts(grammar, call) and not accepts(grammar, call.replace('"days": 2', '"days":2'))
    schema = Constraint.from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert '"\\"a\\": "' in llama_gbnf(schema.grammar)
