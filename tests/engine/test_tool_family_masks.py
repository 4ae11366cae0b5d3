"""Masks on each family's call grammar equal the automaton's brute-force step (every token's
bytes stepped one by one; a control token through its token edges), on hand-made
vocabularies whose control tokens are the family's markers (DeepSeek's and harmony's
markers, Kimi's, Gemma's quote are single tokens there, as in those models' vocabularies),
along seeded random walks; the complete outputs read back (markup written out) to calls
whose arguments validate with `jsonschema`."""

from __future__ import annotations

import random

import jsonschema
import numpy as np
import pytest
from oracles import brute_force_mask  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine.compile import DEAD, compile_grammar
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.tool_families import FAMILIES
from ministruct.grammar.tool_markup import markup_pieces
from ministruct.grammar.tools import read_calls

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 6},
                    "days": {"type": "integer", "minimum": 1, "maximum": 3},
                    "unit": {"enum": ["c", "f"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_weather_2",
            "parameters": {
                "type": "object",
                "properties": {"on": {"type": "boolean"}, "note": {"type": "string"}},
                "required": ["on"],
                "additionalProperties": False,
            },
        },
    },
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
CHARS = "abcdefghijklmnopqrstuvwxyz_0123456789 \n\"{}[]():,.=<>/|'-`TF"
FAMILY_NAMES = [n for n in FAMILIES if n != "json"]


def vocabulary(family: str, seed: int) -> tuple[Vocabulary, set[str]]:
    """Characters, pieces of the family's markup as text tokens, some random strings, and
    the family's tags as control tokens (with their text)."""
    fam = FAMILIES[family]
    rng = random.Random(seed)
    texts = [p.text for part in (fam.open, fam.call, fam.sep, fam.close, fam.param or "") for p in markup_pieces(part)]
    words: set[bytes] = {c.encode() for c in CHARS}
    for t in texts:
        for a in range(len(t)):
            for b in range(a + 2, min(len(t), a + 8) + 1):
                if rng.random() < 0.3:
                    words.add(t[a:b].encode())
    words |= {b"get_weather", b"get_", b"weather", b"_2", b"true", b"True", b"False", b"Paris", b"city"}
    control = set(fam.tags)
    words = {w for w in words if not any(c.encode() in w for c in control)}
    ordered = sorted(words)
    n = len(ordered)
    tags = sorted(control)
    tokens = ordered + [b""] + [b""] * len(tags)
    ids = list(range(n + 1, n + 1 + len(tags)))
    vocab = Vocabulary.from_bytes(tokens, eog_ids=[n], control_ids=ids, control_text=dict(zip(ids, tags)))
    return vocab, control


def brute_force(compiled, cid: int) -> np.ndarray:
    out = brute_force_mask(compiled, cid)
    for t in compiled.vocab.control_ids:
        if t in compiled.vocab.eog_ids:
            continue
        step = compiled.automaton.step_token_edges(compiled.configs[cid], t, compiled.token_edges.resolve)
        out[t] = bool(step)
    return out


@pytest.mark.parametrize("family", FAMILY_NAMES)
@pytest.mark.parametrize("choice", ["required", "auto"])
def test_masks_equal_brute_force_and_outputs_read_back(family, choice):
    fam = FAMILIES[family]
    if choice == "auto" and fam.trigger is None:
        pytest.skip(f"{family} has no trigger: its auto is covered by tests/grammar/test_tools_auto.py")
    vocab, control = vocabulary(family, seed=len(family))
    c = Constraint.from_tools(TOOLS, choice=choice, format=family, parallel=True)
    c = c.with_control_tokens(lambda text: vocab.id_of_control(text) is not None)
    assert c.tools.control == control & set(fam.tags)
    compiled = compile_grammar(c.grammar, vocab, use_cache=False)
    rng = random.Random(family)
    done = 0
    for _walk in range(10):
        cid, ids = compiled.initial, []
        for _ in range(600):
            m = compiled.mask(cid)
            want = brute_force(compiled, cid)
            diff = np.flatnonzero(m != want)
            assert not len(diff), (family, [vocab.piece(int(t)) for t in diff[:8]], [vocab.piece(t) for t in ids])
            legal = np.flatnonzero(m).tolist()
            eog = [t for t in legal if t in vocab.eog_ids]
            rest = [t for t in legal if t not in vocab.eog_ids]
            if eog and (not rest or (len(ids) > 20 and rng.random() < 0.5)):
                break
            ctrl = [t for t in rest if t in vocab.control_ids]
            closing = [t for t in rest if vocab.tokens[t][:1] in (b"<", b'"', b"'", b"}", b"\n")]
            if ctrl and rng.random() < 0.6:
                pool = ctrl  # into the markup, mostly
            elif len(ids) > 30 and closing and rng.random() < 0.7:
                pool = closing  # long walks head for an end
            else:
                pool = rest
            t = rng.choice(pool)
            ids.append(t)
            cid = compiled.step_token(cid, t)
            assert cid != DEAD
        if not compiled.is_accepting(cid):
            continue
        done += 1
        text = "".join(vocab.piece(t) for t in ids)  # the markup written out, as records read it
        read = read_calls(c.tools, text, calls_at=_after_trigger(c, vocab, ids))
        assert read.error is None, (text, read.error)
        for call in read.calls:
            jsonschema.validate(call.arguments, SCHEMAS[call.name])
        if choice == "required":
            assert read.calls, text
    assert done >= 2


def _after_trigger(c: Constraint, vocab: Vocabulary, ids: list[int]) -> int | None:
    trigger = c.tools.format.trigger
    if c.tools.choice != "auto" or trigger not in c.tools.control:
        return None
    tid = vocab.id_of_control(trigger)
    if tid not in ids:
        return None
    k = ids.index(tid)
    return len("".join(vocab.piece(t) for t in ids[: k + 1]))


def test_the_markers_are_control_tokens_in_the_grammar():
    vocab, _ = vocabulary("deepseek_v3_1", seed=1)
    c = Constraint.from_tools(TOOLS, choice="required", format="deepseek_v3_1").with_control_tokens(
        lambda text: vocab.id_of_control(text) is not None
    )
    compiled = compile_grammar(c.grammar, vocab, use_cache=False)
    m = compiled.mask(compiled.initial)
    assert np.flatnonzero(m).tolist() == [vocab.id_of_control("<｜tool▁calls▁begin｜>")]
