"""What a mask's work is keyed by (compile.py: the top of a configuration, its frames
above the caller's return point) gives the exact legal set: masks of one compiled grammar,
shared by configurations that differ below their tops (another caller, another item, a
deeper nesting), equal masks computed from scratch (brute force over Automaton.step_bytes:
no table, no trie, no walk) along random walks of random grammars whose rules are called
from several places, and of random JSON schemas; and a token's step through the top (the
stacks below riding along) is the whole configuration's step."""

from __future__ import annotations

import json
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import brute_force_mask, small_vocabulary  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine.compile import compile_grammar
from ministruct.engine.mask_walks import ROOT
from ministruct.engine.table import DEAD
from ministruct.grammar.constraint import load_constraint
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, RuleRef, Seq

EXAMPLES = int(__import__("os").environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ------------------------------------------------------------------ random grammars

CHARS = "ab1.-\"'"
GRAMMAR_VOCAB = small_vocabulary(3, CHARS, ("ab", "a.", '"a', 'b"', "1-", "..", "'b'"), "ab1", 120, 0.6, 5)

leaves = st.one_of(
    st.text(alphabet="ab1.-", min_size=1, max_size=3).map(Literal),
    st.sampled_from([CharClass(((0x61, 0x62),)), CharClass(((0x30, 0x39),)), CharClass(((0x2D, 0x2E),))]),
)


def bodies(refs: list[str]):
    """Rule bodies that may call the rules named in `refs` (each from several places)."""
    atoms = leaves | st.sampled_from([RuleRef(r) for r in refs]) if refs else leaves
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 3) | st.none()).map(
                lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])
            ),
        ),
        max_leaves=7,
    )


@st.composite
def grammars(draw) -> Grammar:
    """A root calling a few rules, each rule calling only later ones (no left recursion), so
    that a rule's configurations recur under different callers: quoted (a delimiter ends
    the call) and bare (the call may end after any character)."""
    n = draw(st.integers(1, 3))
    names = [f"r{i}" for i in range(n)]
    rules: dict = {}
    for i in reversed(range(n)):
        body = draw(bodies(names[i + 1 :]))
        rules[names[i]] = Seq((Literal('"'), body, Literal('"'))) if draw(st.booleans()) else body
    rules["root"] = draw(bodies(names))
    order = ["root", *names]
    return Grammar({k: rules[k] for k in order})


def walk_against_scratch(compiled, seed: int, steps: int) -> int:
    """Masks along a random walk, each against brute force; returns the steps checked."""
    rng = random.Random(seed)
    cid, checked = compiled.initial, 0
    for _ in range(steps):
        mask = compiled.mask(cid)
        want = brute_force_mask(compiled, cid)
        assert np.array_equal(mask, want), (seed, checked, np.flatnonzero(mask != want)[:10])
        checked += 1
        legal = [t for t in np.flatnonzero(mask).tolist() if t not in compiled.eog]
        if not legal:
            break
        token = rng.choice(legal)
        nxt = compiled.step_token(cid, token)
        # the step through the top (the base riding along) is the whole configuration's step
        want_config = compiled.automaton.step_bytes(compiled.configs[cid], compiled.vocab.tokens[token])
        assert nxt != DEAD and compiled.configs[nxt] == want_config, (seed, checked, token)
        cid = nxt
    return checked


@SETTINGS
@given(grammar=grammars(), seeds=st.lists(st.integers(0, 2**16), min_size=2, max_size=4))
def test_masks_of_random_grammars_equal_masks_from_scratch(grammar, seeds):
    # one compiled grammar for every walk: later walks meet configurations whose tops
    # earlier ones walked under other callers
    compiled = compile_grammar(grammar, GRAMMAR_VOCAB, use_cache=False)
    for seed in seeds:
        walk_against_scratch(compiled, seed, 25)


# ------------------------------------------------------------------ random schemas

JSON_CHARS = '{}[]":,ab1.-_ \\'
JSON_VOCAB = small_vocabulary(
    5,
    JSON_CHARS,
    ('{"', '":', '",', '"}', '"]', '["', "true", "false", "null", '"a', 'b"', "ab", "1.", "-1", ', "', '": '),
    'ab1._-"',
    200,
    0.7,
    5,
)
strings = st.one_of(
    st.just({"type": "string"}),
    st.integers(0, 4).map(lambda n: {"type": "string", "maxLength": n}),
    st.sampled_from(["^a+$", "[ab]+\\.1", "a(b\\.)*1", "^[a-b_]{1,3}$"]).map(
        lambda p: {"type": "string", "pattern": p}
    ),
    st.just({"enum": ["a", "ab", "b.1"]}),
)
scalars = st.one_of(strings, st.sampled_from([{"type": "integer"}, {"type": "number"}, {"type": "boolean"}]))


def schemas():
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.tuples(inner, st.integers(0, 1), st.integers(1, 3) | st.none()).map(
                lambda t: {
                    "type": "array",
                    "items": t[0],
                    "minItems": t[1],
                    **({} if t[2] is None else {"maxItems": t[2]}),
                }
            ),
            st.dictionaries(st.sampled_from(["a", "b", "ab", "a_b"]), inner, min_size=1, max_size=3).flatmap(
                lambda props: st.lists(st.sampled_from(sorted(props)), unique=True).map(
                    lambda req: {"type": "object", "properties": props, "required": req}
                )
            ),
        ),
        max_leaves=5,
    )


@SETTINGS
@given(
    schema=schemas(),
    layout=st.sampled_from(["compact", "spaced"]),
    seeds=st.lists(st.integers(0, 2**16), min_size=2, max_size=3),
)
def test_masks_of_random_schemas_equal_masks_from_scratch(tmp_path_factory, schema, layout, seeds):
    path = tmp_path_factory.mktemp("schema") / "s.json"
    path.write_text(json.dumps(schema))
    grammar = load_constraint(schema=str(path), whitespace=layout).grammar
    compiled = compile_grammar(grammar, JSON_VOCAB, use_cache=False)
    for seed in seeds:
        walk_against_scratch(compiled, seed, 30)


# ------------------------------------------------------------------ the key itself


def test_a_rule_called_from_two_places_walks_once_from_its_top(tmp_path):
    """One pattern-bounded string (a definition) at two properties: inside it, the
    configurations differ only in the caller's return point, and their masks share the
    walk from the root (one relative configuration, walked once), with exact masks at both."""
    schema = {
        "type": "object",
        "properties": {p: {"$ref": "#/definitions/s"} for p in ("a", "b")},
        "required": ["a", "b"],
        "definitions": {"s": {"type": "string", "pattern": "^a(b\\.)*1$"}},
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    grammar = load_constraint(schema=str(path), whitespace="compact").grammar
    compiled = compile_grammar(grammar, JSON_VOCAB, use_cache=False)
    first = compiled.step_bytes(compiled.initial, b'{"a":"ab.')
    second = compiled.step_bytes(compiled.initial, b'{"a":"a1","b":"ab.')
    assert first != DEAD and second != DEAD and compiled.configs[first] != compiled.configs[second]
    base1, rel1 = compiled._slice_split(first)
    base2, rel2 = compiled._slice_split(second)
    assert base1 != base2 and rel1 == rel2
    assert np.array_equal(compiled.mask(first), brute_force_mask(compiled, first))
    walks = len(compiled._walks)
    assert np.array_equal(compiled.mask(second), brute_force_mask(compiled, second))
    assert (ROOT, rel2) in compiled._walks and len(compiled._walks) <= walks + 1  # (at most the return's walk is new)
