"""Test helpers for the grammar front ends: random strings derived from a Grammar IR."""

from __future__ import annotations

import random
from pathlib import Path

from ministruct.grammar.ir import Alt, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, Seq, TokenRef

_INF = float("inf")
_SURROGATES = (0xD800, 0xDFFF)


def _measure(grammar: Grammar):
    """(shortest length per rule, shortest length of any expression), in code points."""
    best: dict[str, float] = {n: _INF for n in grammar.rules}

    def length(e: Expr) -> float:
        if isinstance(e, Literal):
            return len(e.text)
        if isinstance(e, CharClass):
            return 1 if _ranges(e) else _INF
        if isinstance(e, TokenRef):
            raise ValueError("sample_strings cannot derive token references")
        if isinstance(e, RuleRef):
            return best.get(e.name, _INF)
        if isinstance(e, Seq):
            return sum(length(x) for x in e.items)
        if isinstance(e, Alt):
            return min(length(x) for x in e.options)
        if isinstance(e, Repeat):
            return 0 if e.min == 0 else e.min * length(e.item)
        raise TypeError(e)

    changed = True
    while changed:
        changed = False
        for n, e in grammar.rules.items():
            v = length(e)
            if v < best[n]:
                best[n], changed = v, True
    return best, length


def min_lengths(grammar: Grammar) -> dict[str, float]:
    """Shortest string length (in code points) each rule derives (inf when it derives none)."""
    return _measure(grammar)[0]


def _ranges(c: CharClass) -> list[tuple[int, int]]:
    """Matched ranges minus the surrogates (not encodable as UTF-8)."""
    out = []
    for a, b in c.code_point_ranges():
        if b < _SURROGATES[0] or a > _SURROGATES[1]:
            out.append((a, b))
        else:
            if a < _SURROGATES[0]:
                out.append((a, _SURROGATES[0] - 1))
            if b > _SURROGATES[1]:
                out.append((_SURROGATES[1] + 1, b))
    return out


def sample_strings(grammar: Grammar, rng: random.Random, max_depth: int = 12, count: int = 1) -> list[str]:
    """`count` random strings of the grammar's language.

    A random derivation of the IR; deeper than `max_depth` it takes the shortest
    alternative and the fewest repetitions, so it always ends on productive grammars.
    """
    _, length = _measure(grammar)

    def gen(e: Expr, depth: int, out: list[str]) -> None:
        deep = depth > max_depth
        if isinstance(e, Literal):
            out.append(e.text)
        elif isinstance(e, CharClass):
            rs = _ranges(e)
            ascii_rs = [(a, min(b, 0x7E)) for a, b in rs if a <= 0x7E]
            if ascii_rs and rng.random() < 0.8:
                rs = ascii_rs
            a, b = rng.choice(rs)
            out.append(chr(rng.randint(a, b)))
        elif isinstance(e, RuleRef):
            gen(grammar.rules[e.name], depth + 1, out)
        elif isinstance(e, Seq):
            for x in e.items:
                gen(x, depth, out)
        elif isinstance(e, Alt):
            finite = [x for x in e.options if length(x) < _INF]
            if deep:
                pick = min(finite, key=length)
            else:
                pick = rng.choice(finite)
            gen(pick, depth + 1, out)
        elif isinstance(e, Repeat):
            hi = e.max if e.max is not None else e.min + 3
            n = e.min if deep else rng.randint(e.min, hi)
            for _ in range(n):
                gen(e.item, depth + 1, out)
        else:
            raise ValueError(f"cannot sample {e!r}")

    result = []
    for _ in range(count):
        out: list[str] = []
        gen(RuleRef(grammar.root), 0, out)
        result.append("".join(out))
    return result


def check_strings_against_jsonschema(schema: dict, texts: list[str]) -> None:
    """The schema's grammar accepts each text (raw and \\u-escaped JSON) exactly when the
    jsonschema validator does; a schema refused as accepting no value accepts none of them."""
    import json

    from jsonschema import Draft202012Validator

    from ministruct.engine.automaton import accepts
    from ministruct.errors import SchemaError
    from ministruct.grammar.schema.compiler import schema_to_grammar

    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        assert not any(validator.is_valid(t) for t in texts), schema
        return
    for t in texts:
        expected = validator.is_valid(t)
        assert accepts(g, json.dumps(t, ensure_ascii=False)) == expected, (schema, t)
        assert accepts(g, json.dumps(t)) == expected, (schema, t)


def shared_suites() -> Path:
    """../shared/suites beside the project root (for a git worktree, beside an ancestor)."""
    here = Path(__file__).resolve()
    for p in here.parents[2:]:
        if (p / "shared" / "suites").is_dir():
            return p / "shared" / "suites"
    return here.parents[2] / ".." / "shared" / "suites"


def duplicate_keys(text: str) -> bool:
    """Does the JSON text hold an object with a key twice? (Not prevented among additional
    properties: the schema compiler says so.)"""
    import json

    dup = []

    def pairs(kv: list) -> dict:
        if len({k for k, _ in kv}) < len(kv):
            dup.append(kv)
        return dict(kv)

    json.loads(text, object_pairs_hook=pairs)
    return bool(dup)
