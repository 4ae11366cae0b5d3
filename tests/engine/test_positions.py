"""Position tags from the parser's configurations (engine/positions.py) against an
independent replay: a small JSON reader written here that walks the whole output and
says, for each byte, the JSON pointer of the value being generated and the part. The
outputs are hypothesis-made instances (escaped and non-ASCII strings, nested objects,
arrays, optional members sharing a key prefix), cut into random "tokens" so that
tokens span positions. Marks leave the language unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from json_replay import Replay  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine.automaton import Automaton, accepts, accepts_prefix
from ministruct.engine.positions import END_POSITION, Position, PositionReader
from ministruct.grammar.gbnf import parse_gbnf
from ministruct.grammar.limits import bounded
from ministruct.grammar.schema import schema_to_grammar

MIXED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "category": {"enum": ["fruit", "vegetable", "grain"]},
        "calories": {"type": "integer"},
        "organic": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "origin": {
            "type": "object",
            "properties": {"country": {"type": "string"}, "region": {"type": "string"}},
            "required": ["country", "region"],
        },
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
        "batches": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        },
    },
    "required": ["name", "category"],
}
# optional members whose keys share a prefix: the key is told apart only later
PREFIXED = {
    "type": "object",
    "properties": {"alpha": {"type": "integer"}, "alps": {"type": "string"}, "al": {"type": "boolean"}},
}


def reader_for(schema, **options) -> PositionReader:
    return PositionReader(Automaton(bounded(schema_to_grammar(schema, marks=True, **options))))


MIXED_READER = reader_for(MIXED, whitespace="compact")
FLEX_READER = reader_for(MIXED, whitespace="flexible")
PREFIXED_READER = reader_for(PREFIXED, whitespace="compact")
SPACED_READER = reader_for(MIXED)  # the default layout: its one space is whitespace, as the replay says

text_st = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@st.composite
def mixed_instance(draw):
    v = {"name": draw(text_st), "category": draw(st.sampled_from(["fruit", "vegetable", "grain"]))}
    if draw(st.booleans()):
        v["calories"] = draw(st.integers(-(10**6), 10**6))
    if draw(st.booleans()):
        v["organic"] = draw(st.booleans())
    if draw(st.booleans()):
        v["tags"] = draw(st.lists(text_st, max_size=3))
    if draw(st.booleans()):
        v["origin"] = {"country": draw(text_st), "region": draw(text_st)}
    if draw(st.booleans()):
        v["pair"] = [draw(st.integers(0, 99)), draw(text_st)][: draw(st.integers(0, 2))]
    if draw(st.booleans()):
        v["batches"] = [{"n": draw(st.integers(0, 9))} for _ in range(draw(st.integers(0, 2)))]
    return v


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    out, i = [], 0
    for n in sizes:
        if i >= len(data):
            break
        out.append(data[i : i + n])
        i += n
    if i < len(data):
        out.append(data[i:])
    return out


def check(reader: PositionReader, text: str, sizes: list[int], tuples: set[str]) -> int:
    """Every byte's tag equals the replay's; token runs group them in order. Returns how
    many tokens span positions."""
    data = text.encode("utf-8")
    want = Replay(text, tuples).run()
    got = reader.of_bytes(data)
    assert [tuple((p.pointer, p.part) for p in g) for g in got] == [(w,) for w in want], text
    pieces = cut(data, sizes)
    runs = reader.of_tokens(pieces)
    flat = [(p.pointer, p.part) for r in runs for p, n in r for _ in range(n)]
    assert flat == want
    return sum(len(r) > 1 for r in runs)


@settings(max_examples=150, deadline=None)
@given(mixed_instance(), st.booleans(), st.lists(st.integers(1, 6), min_size=1, max_size=60))
def test_tags_equal_the_replay_on_compact_json(value, ascii_only, sizes):
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=ascii_only)
    check(MIXED_READER, text, sizes, {"/pair"})


@settings(max_examples=80, deadline=None)
@given(mixed_instance(), st.lists(st.integers(1, 6), min_size=1, max_size=60))
def test_tags_equal_the_replay_on_the_default_layout(value, sizes):
    check(SPACED_READER, json.dumps(value), sizes, {"/pair"})


@settings(max_examples=60, deadline=None)
@given(mixed_instance(), st.sampled_from([None, 0, 1, 2]), st.lists(st.integers(1, 6), min_size=1, max_size=60))
def test_tags_equal_the_replay_with_whitespace(value, indent, sizes):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    check(FLEX_READER, text, sizes, {"/pair"})


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries({}, optional={"alpha": st.integers(0, 999), "alps": text_st, "al": st.booleans()}).map(
        lambda d: {k: d[k] for k in ("alpha", "alps", "al") if k in d}
    ),
    st.lists(st.integers(1, 6), min_size=1, max_size=20),
)
def test_keys_sharing_a_prefix_are_told_apart_by_the_rest_of_the_output(value, sizes):
    check(PREFIXED_READER, json.dumps(value, separators=(",", ":")), sizes, set())


def test_escapes_and_spanning_tokens_on_a_hand_made_case():
    value = {
        "name": 'say "hi"\\ \u00e9\u20ac',
        "category": "grain",
        "tags": ["a\nb"],
        "origin": {"country": "", "region": "x"},
    }
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    # tokens of 3 bytes: '{"n', 'ame', '":"', ... span key, structure and value
    assert check(MIXED_READER, text, [3] * 100, {"/pair"}) > 5
    runs = MIXED_READER.of_tokens([b'{"name', b'":"', b"s"])
    assert runs[1] == [
        (Position("/name", "key"), 1),
        (Position("/name", "structure"), 1),
        (Position("/name", "value"), 1),
    ]


def test_a_token_without_bytes_is_the_end():
    assert MIXED_READER.of_tokens([b'{"name":"","category":"fruit"}', b""])[1] == [(END_POSITION, 0)]


def test_a_prefix_keeps_every_position_still_possible():
    """Before the output says which key it is, both stay (sorted); the runs take the first."""
    got = PREFIXED_READER.of_bytes(b'{"alp')
    assert {p.pointer for p in got[-1]} == {"/alpha", "/alps"}


def test_gbnf_positions_are_the_innermost_rule():
    g = parse_gbnf('root ::= "(" item ("," item)* ")"\nitem ::= word | num\nword ::= [a-z]+\nnum ::= [0-9]+\n')
    r = PositionReader(Automaton(g))
    got = [p[0].pointer for p in r.of_bytes(b"(ab,12)")]
    assert got == ["root", "word", "word", "root", "num", "num", "root"]


@settings(max_examples=80, deadline=None)
@given(mixed_instance(), st.integers(0, 60))
def test_marks_leave_the_language_unchanged(value, cut_at):
    text = json.dumps(value)  # the default layout
    plain = schema_to_grammar(MIXED)
    marked = schema_to_grammar(MIXED, marks=True)
    assert plain.marks == {} and marked.marks
    for t in (text, text[:cut_at], text[:cut_at] + "x", text + " ", text.replace(":", "=", 1)):
        assert accepts(plain, t) == accepts(marked, t)
        assert accepts_prefix(plain, t) == accepts_prefix(marked, t)


def test_without_marks_the_grammar_is_as_before():
    assert schema_to_grammar(MIXED).to_gbnf() == schema_to_grammar(MIXED, marks=False).to_gbnf()
    assert "member" not in schema_to_grammar(MIXED).to_gbnf()


@pytest.mark.model
def test_marked_and_plain_grammars_give_the_same_masks(model):
    """The kept frames change the configurations, never the legal sets."""
    from ministruct.engine.compile import compile_grammar
    from ministruct.engine.matcher import Matcher

    vocab = model.vocabulary
    value = {"name": 'a "b"', "category": "grain", "tags": ["x", "y"], "origin": {"country": "FR", "region": "N"}}
    text = json.dumps(value)  # the default layout
    ids = model.tokenize_bytes(text.encode())
    plain = Matcher(compile_grammar(bounded(schema_to_grammar(MIXED)), vocab, use_cache=False))
    marked = Matcher(compile_grammar(bounded(schema_to_grammar(MIXED, marks=True)), vocab, use_cache=False))
    for t in ids:
        assert np.array_equal(plain.mask(), marked.mask())
        plain.advance(t)
        marked.advance(t)
    assert plain.is_accepting() and marked.is_accepting()
    assert np.array_equal(plain.mask(), marked.mask())


# members whose key the output names: additionalProperties (an object of its own, with
# additional string members), and patternProperties beside additionalProperties
EXTRA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "additionalProperties": {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "additionalProperties": {"type": "string"},
    },
}
PATTERNS = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "patternProperties": {"^p": {"type": "integer"}, "^q": {"type": "array", "items": {"type": "string"}}},
    "additionalProperties": {"type": "boolean"},
}
EXTRA_READERS = {ws: reader_for(EXTRA, whitespace=ws) for ws in ("compact", "flexible")}
PATTERN_READERS = {ws: reader_for(PATTERNS, whitespace=ws) for ws in ("compact", "flexible")}
# keys without control characters: json.dumps writes those as ASCII \u escapes, which the
# generation language leaves out where a key could still become a listed name
key_st = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=6)


@st.composite
def extra_instance(draw):
    v: dict = {}
    if draw(st.booleans()):
        v["a"] = draw(st.integers(-99, 99))
    for k in draw(st.lists(key_st.filter(lambda k: k != "a"), max_size=3, unique=True)):
        inner: dict = {}
        if draw(st.booleans()):
            inner["x"] = draw(st.integers(0, 9))
        for k2 in draw(st.lists(key_st.filter(lambda k: k != "x"), max_size=2, unique=True)):
            inner[k2] = draw(text_st)
        v[k] = inner
    return v


@st.composite
def pattern_instance(draw):
    v: dict = {}
    if draw(st.booleans()):
        v["name"] = draw(text_st)
    for k in draw(st.lists(key_st.filter(lambda k: k != "name"), max_size=4, unique=True)):
        if k.startswith("p") and k.startswith("q"):
            continue
        if k.startswith("p"):
            v[k] = draw(st.integers(-9, 99))
        elif k.startswith("q"):
            v[k] = draw(st.lists(text_st, max_size=2))
        else:
            v[k] = draw(st.booleans())
    return v


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(["extra", "patterns"]),
    st.data(),
    st.sampled_from([None, 1]),
    st.booleans(),
    st.lists(st.integers(1, 6), min_size=1, max_size=60),
)
def test_additional_and_pattern_members_take_their_key_from_the_output(kind, data, indent, ascii_only, sizes):
    """The value of an additional or pattern property is at the pointer of the key the
    output wrote (escaped keys, `/` and `~` in keys, nested additional members), as the
    replay says, byte for byte and token by token."""
    value = data.draw(extra_instance() if kind == "extra" else pattern_instance())
    ws = "compact" if indent is None else "flexible"
    readers = EXTRA_READERS if kind == "extra" else PATTERN_READERS
    separators = (",", ":") if indent is None else None
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=ascii_only)
    assert accepts(readers[ws].auto.grammar, text), text
    check(readers[ws], text, sizes, set())


def test_a_key_cut_off_is_a_star_and_keys_with_slashes_are_escaped():
    r = EXTRA_READERS["compact"]
    got = r.of_bytes(b'{"k/~":{"x":1,"y":"v"},"ab')
    assert got[2] == (Position("/k~1~0", "key"),)
    assert (Position("/k~1~0/y", "value"),) in got
    assert got[-1] == (Position("/*", "key"),)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["extra", "patterns"]), st.data(), st.integers(0, 60))
def test_marks_leave_the_language_of_named_members_unchanged(kind, data, cut_at):
    schema = EXTRA if kind == "extra" else PATTERNS
    value = data.draw(extra_instance() if kind == "extra" else pattern_instance())
    text = json.dumps(value)  # the default layout
    plain, marked = schema_to_grammar(schema), schema_to_grammar(schema, marks=True)
    for t in (text, text[:cut_at], text[:cut_at] + "x", text.replace(":", "=", 1), text.replace("true", "1", 1)):
        assert accepts(plain, t) == accepts(marked, t)
        assert accepts_prefix(plain, t) == accepts_prefix(marked, t)
