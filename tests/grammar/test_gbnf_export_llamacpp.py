"""Every grammar `convert --to gbnf` prints is one llama.cpp takes, with the same language
(issue 29: a `$ref` cycle printed a left-recursive grammar that crashed llama.cpp's server).

Fuzzed JSON Schemas, GBNF grammars and regexes are converted as `convert --to gbnf` does
(`grammar.export.llama_gbnf`); a child process (tests/llamacpp_grammar_child.py) hands
each to llama-cpp-python (`LlamaGrammar.from_string`, then llama.cpp's own parser, as its
server does) and runs llama.cpp's grammar sampler on strings sampled from our grammar and
on mutations of them. The grammar must parse (a crash ends the child: counted as a
failure) and llama.cpp's verdict on every string must be ours (`check_text`).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ministruct.check.grammar import check_text
from ministruct.errors import MinistructError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.export import llama_gbnf
from ministruct.grammar.ir import Alt, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, Seq

TESTS = Path(__file__).resolve().parents[1]
EXAMPLES = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


class LlamaCpp:
    """The child process; started again after a grammar crashed it."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.crashed: list[str] = []
        self.refused: list[str] = []
        self.disagreed: list[tuple[str, str, bool]] = []
        self.bytes: set[int] = set()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(TESTS / "llamacpp_grammar_child.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=TESTS,
        )
        ready = json.loads(self.proc.stdout.readline())
        self.bytes = set(ready["bytes"])

    def verdicts(self, gbnf: str, texts: list[str]) -> tuple[bool, list[bool]] | None:
        """(parsed, accepts per text), or None when the grammar crashed llama.cpp."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"gbnf": gbnf, "texts": texts}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.proc = None
            return None
        got = json.loads(line)
        return got["parsed"], got["accepts"]

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def llama():
    child = LlamaCpp()
    yield child
    child.close()


# ------------------------------------------------------------------ strings of a grammar


def sample(g: Grammar, rng: random.Random, budget: int = 60) -> str | None:
    """A random string of the grammar's language (None when the derivation ran too deep)."""
    out: list[str] = []
    steps = [0]

    def go(e: Expr, depth: int) -> bool:
        steps[0] += 1
        if depth > 12 or steps[0] > 400:
            return False
        t = type(e)
        if t is Literal:
            out.append(e.text)
            return True
        if t is CharClass:
            rs = [(a, b) for a, b in e.code_point_ranges() if not (0xD800 <= a and b <= 0xDFFF)]
            if not rs:
                return False
            a, b = rng.choice(rs)
            cp = rng.randint(a, min(b, a + 300))
            if 0xD800 <= cp <= 0xDFFF:
                cp = a if not 0xD800 <= a <= 0xDFFF else 0xE000
            out.append(chr(cp))
            return True
        if t is Seq:
            return all(go(x, depth) for x in e.items)
        if t is Alt:
            return go(rng.choice(e.options), depth)
        if t is Repeat:
            hi = e.min + 2 if e.max is None else min(e.max, e.min + 2)
            return all(go(e.item, depth) for _ in range(rng.randint(e.min, hi)))
        if t is RuleRef:
            return go(g.rules[e.name], depth + 1)
        return False  # a token reference: no text

    for _ in range(8):
        out.clear()
        steps[0] = 0
        if go(g.rules[g.root], 0) and len("".join(out)) <= budget:
            return "".join(out)
    return None


def strings_of(g: Grammar, seed: int) -> list[str]:
    """A few strings of the language and mutations of them (most outside it)."""
    rng = random.Random(seed)
    got = [s for s in (sample(g, rng) for _ in range(3)) if s is not None]
    mutated = []
    for s in got[:2]:
        i = rng.randint(0, len(s))
        mutated.append(s[:i] + rng.choice('a0"{}[],: ') + s[i:])
        if s:
            mutated.append(s[: max(0, len(s) - 1)])
    return list(dict.fromkeys(got + mutated))


def agree(llama: LlamaCpp, c: Constraint, seed: int) -> None:
    gbnf = llama_gbnf(c.grammar)
    texts = [t for t in strings_of(c.grammar, seed) if set(t.encode("utf-8")) <= llama.bytes or not llama.bytes]
    got = llama.verdicts(gbnf, texts)
    assert got is not None, f"llama.cpp crashed on:\n{gbnf}"
    parsed, accepts = got
    assert parsed, f"llama.cpp refused:\n{gbnf}"
    for text, theirs in zip(texts, accepts):
        ours = check_text(c.grammar, text).accepted
        assert ours == theirs, (text, ours, gbnf)


# ------------------------------------------------------------------ fuzzed constraints

leaf_schemas = st.one_of(
    st.just({"type": "integer"}),
    st.builds(
        lambda a, d: {"type": "integer", "minimum": a, "maximum": a + d}, st.integers(-50, 50), st.integers(0, 200)
    ),
    st.builds(lambda k: {"type": "string", "maxLength": k}, st.integers(0, 4)),
    st.just({"type": "string", "pattern": "^[a-c]{1,3}$"}),
    st.just({"type": "string", "format": "date"}),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.just({"type": "number"}),
    st.builds(
        lambda vs: {"enum": vs},
        st.lists(st.one_of(st.text('ab"\\é', max_size=3), st.integers(-3, 3)), min_size=1, max_size=3),
    ),
)


def _object(props: dict, required: list[str], closed: bool) -> dict:
    out = {"type": "object", "properties": props, "required": [k for k in required if k in props]}
    if closed:
        out["additionalProperties"] = False
    return out


schemas = st.recursive(
    leaf_schemas,
    lambda kids: st.one_of(
        st.builds(lambda x, k: {"type": "array", "items": x, "maxItems": k}, kids, st.integers(0, 3)),
        st.builds(
            _object,
            st.dictionaries(st.sampled_from(["a", "b", "c d"]), kids, max_size=3),
            st.lists(st.sampled_from(["a", "b", "c d"]), max_size=2),
            st.booleans(),
        ),
        st.builds(lambda xs: {"anyOf": xs}, st.lists(kids, min_size=1, max_size=3)),
        st.builds(
            lambda x: {
                "$defs": {"t": {"anyOf": [x, {"type": "array", "items": {"$ref": "#/$defs/t"}, "maxItems": 2}]}},
                "$ref": "#/$defs/t",
            },
            kids,
        ),
        st.builds(
            lambda x: {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}, x]}},
                "$ref": "#/$defs/a",
            },
            kids,
        ),
    ),
    max_leaves=6,
)


@EXAMPLES
@given(schemas, st.sampled_from(["compact", "flexible", "pretty"]), st.integers(0, 2**16))
def test_converted_schemas_are_taken_by_llama_cpp_with_the_same_language(llama, schema, ws, seed):
    try:
        c = Constraint.from_json_schema(schema, whitespace=ws)
    except MinistructError:
        assume(False)  # refused with a message (a $ref cycle, ...): nothing is printed
    agree(llama, c, seed)


TERMINALS = ['"a"', '"bc"', '"\\""', "[a-c]", "[^a-y]", "[0-9]", '"é"', "[\\t ]", '""']


def _item(atom: str, op: str) -> str:
    return f"({atom}){op}" if op else atom


def bodies(*refs: str) -> st.SearchStrategy[str]:
    """Rule bodies over terminals, the rules in `refs`, and `"(" r1 ")"` (recursion after a terminal)."""
    atoms = st.sampled_from(TERMINALS + list(refs))
    items = st.builds(_item, atoms, st.sampled_from(["", "", "?", "*", "+", "{1,2}", "{2}"]))
    return st.lists(st.lists(items, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=3).map(" | ".join)


@EXAMPLES
@given(bodies("r1", "r2"), bodies("r2", '"(" r1 ")"'), bodies(), st.integers(0, 2**16))
def test_converted_gbnf_is_taken_by_llama_cpp_with_the_same_language(llama, root, r1, r2, seed):
    text = f"root ::= {root}\nr1 ::= {r1}\nr2 ::= {r2}\n"
    try:
        c = Constraint.from_gbnf(text)
    except MinistructError:
        assume(False)  # left recursion, ...: refused with a message
    agree(llama, c, seed)


regex_atoms = st.sampled_from(["a", "b", "[a-c]", r"\d", "[^a-z]", "(ab|c)", "x?", "é", r"\.", "[ -~]"])
regexes = st.lists(
    st.builds(lambda a, q: a + q, regex_atoms, st.sampled_from(["", "", "*", "+", "?", "{1,3}"])),
    min_size=1,
    max_size=4,
).map("".join)


@EXAMPLES
@given(st.lists(regexes, min_size=1, max_size=2).map("|".join), st.integers(0, 2**16))
def test_converted_regexes_are_taken_by_llama_cpp_with_the_same_language(llama, regex, seed):
    try:
        c = Constraint.from_regex(regex)
    except MinistructError:
        assume(False)
    agree(llama, c, seed)


@pytest.mark.parametrize(
    "text",
    [
        'root ::= r1*\nr1 ::= ""\n',  # found by the fuzzing above: llama.cpp refused it
        'root ::= ("" | "a")+ "b"\n',
        'root ::= (r1 r2)* "."\nr1 ::= "x"?\nr2 ::= ("y" r2)?\n',
        'root ::= ("(" root ")" | "")*\n',
    ],
)
def test_repetitions_of_nullable_items_are_printed_as_llama_cpp_takes_them(llama, text):
    agree(llama, Constraint.from_gbnf(text), seed=7)


LARK_TERMINALS = ['"a"', '"bc"', "/[a-c]/", '"é"', '"+"', '"-"']


@EXAMPLES
@given(st.lists(st.sampled_from(LARK_TERMINALS), min_size=6, max_size=6), st.booleans(), st.integers(0, 2**16))
def test_left_recursive_lark_is_printed_as_llama_cpp_takes_it(llama, t, indirect, seed):
    # operator-precedence grammars as people write them in Lark, directly or indirectly
    # left-recursive (the front end rewrites it away: grammar/left_recursion.py); freely
    # ambiguous random grammars are left to test_left_recursion.py: llama.cpp's grammar
    # sampler keeps every parse alive and runs for minutes on some of them
    low = f"r0: r0 {t[0]} r1 | r1" if not indirect else f"r0: r3 {t[0]} r1 | r1\nr3: r0 | r3 {t[5]}"
    text = f'start: r0\n{low}\nr1: r1 {t[1]} r2 | r2 {t[2]}?\nr2: {t[3]} | "(" r0 ")" | {t[4]} r2\n'
    agree(llama, Constraint.from_lark(text, lexer="cfl"), seed)  # (GBNF has no lexer)
