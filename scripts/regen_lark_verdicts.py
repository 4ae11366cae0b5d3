"""Regenerate tests/grammar/lark/greedy_verdicts.json: llguidance's own verdicts, byte by byte,
on strings of Lark grammars (the two benchmark grammars and random small ones), for the
differential test of the greedy reading (tests/grammar/lark/test_lark_greedy_differential.py).

    .venv/bin/python scripts/regen_lark_verdicts.py          # rewrite the table (needs llguidance)
    .venv/bin/python scripts/regen_lark_verdicts.py --check  # exit 1 if llguidance now says otherwise

The strings are random walks of each grammar's context-free reading (every split of the
text into terminals, `lexer="cfl"`: they glue keywords to names, leave gaps out, so the
greedy lexer cuts many of them), with random bytes mixed in. Per string the table keeps
how many of its bytes llguidance (byte tokenizer, no model) takes before it refuses one,
and whether it accepts the whole. Never edit the JSON by hand.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "grammar" / "lark" / "greedy_verdicts.json"
BENCH = ["sql_select.lark", "python_expr.lark"]
WALKS_PER_BENCH = 250
SMALL_GRAMMARS = 100
WALKS_PER_SMALL = 8
NOISE = "abcxyzSELECTFROMinorfor_09 ,.()+-*/=<>'\"\n\t;:é"

# pieces of the small grammars: terminals that overlap (names and keywords, numbers,
# prefixes of each other, lexemes that may be empty) and skips
TERMINALS = [
    "NAME: /[a-z_][a-z0-9_]*/",
    "NUM: /[0-9]+/",
    "WORD: /[a-z]+/",
    "AB: /a+b?/",
    "BS: /b*/",
    'KW: "in" | "int" | "if"',
    'DOT: "." | ".."',
]
LITERALS = ['"if"', '"in"', '"for"', '"a"', '"ab"', '"b"', '"("', '")"', '","', '"+"', '"."', '"x"', '"abc"']
IGNORES = ["", '%ignore " "', "%import common.WS\n%ignore WS", "%ignore /[ \\t]+/", '%ignore "#" /[a-z]*/ "\\n"']


def small_grammar(rng: random.Random) -> str:
    """A random small Lark grammar over overlapping lexemes."""
    terms = rng.sample(TERMINALS, rng.randint(1, 3))
    names = [t.split(":")[0] for t in terms]

    def atom(depth: int) -> str:
        r = rng.random()
        if r < 0.35:
            return rng.choice(names)
        if r < 0.65 or depth > 1:
            return rng.choice(LITERALS)
        return "(" + item(depth + 1) + ")"

    def item(depth: int) -> str:
        parts = []
        for _ in range(rng.randint(1, 3)):
            a = atom(depth)
            a += rng.choice(["", "", "", "?", "*", "+"])
            parts.append(a)
        text = " ".join(parts)
        if rng.random() < 0.3:
            text += " | " + " ".join(atom(depth) for _ in range(rng.randint(1, 2)))
        return text

    rules = [f"start: {item(0)}"]
    if rng.random() < 0.3:
        rules[0] += " rest"
        rules.append(f"rest: {item(1)} | {rng.choice(LITERALS)}")
    if rng.random() < 0.15:
        rules[0] = "start: (call)* TAIL"
        rules.append('call: head /[0-9]+/ ")"')
        rules.append('head[lazy]: TAIL "f("')
        terms.append("TAIL: /[a-z ()]*/")
    ignore = rng.choice(IGNORES)
    if ignore and rng.random() < 0.15:
        ignore = '%llguidance {"allow_initial_skip": true}\n' + ignore
    return "\n".join(rules + terms + ([ignore] if ignore else [])) + "\n"


def cfl_walk(automaton, rng: random.Random, max_len: int) -> bytes:
    """A random string of the automaton's language (or a prefix of one), bytes chosen among
    those allowed, with random bytes mixed in now and then."""
    config, out = automaton.initial, bytearray()
    while len(out) < max_len:
        if automaton.is_accepting(config) and rng.random() < 0.08:
            break
        if out and rng.random() < 0.03:
            b = rng.choice(NOISE).encode()
        else:
            allowed = [x for lo, hi in automaton.allowed_bytes(config) for x in range(lo, min(hi, 0x7E) + 1)]
            if not allowed:
                break
            x = rng.choice(allowed)
            if chr(x).isspace() and rng.random() < 0.7:  # (gaps left out glue lexemes together)
                x = rng.choice(allowed)
            b = bytes([x])
        nxt = automaton.step_bytes(config, b)
        out += b
        if not nxt:
            break
        config = nxt
    return bytes(out)


NESTED_GRAMMARS = 40
NESTED_IGNORES = ["", "", '%ignore " "', '%ignore "-"', "%import common.WS\n%ignore WS"]


def nested_grammar(rng: random.Random) -> str:
    """A random grammar with `%lark` blocks inside (one or two levels), each with its own
    `%ignore` or none: which skip is allowed where (lexeme classes) is what they test."""

    def block(depth: int, indent: str) -> str:
        lits = rng.sample(['"a"', '"b"', '"c"', '"d"', "NAME"], 3)
        mid = rng.choice(["", "inner ", "inner? "] if depth < 2 else [""])
        body = f"{lits[0]} {mid}{lits[1]}{rng.choice(['', '?', '*'])}"
        if rng.random() < 0.3:
            body += f" | {lits[2]}"
        lines = [f"start: {body}", "NAME: /[a-z]+/"]
        if "inner" in body:
            lines += ["inner: %lark {", block(depth + 1, "  "), "}"]
        ignore = rng.choice(NESTED_IGNORES)
        if ignore:
            lines += ignore.split("\n")
        return "\n".join(indent + x for x in "\n".join(lines).split("\n"))

    use = rng.choice(["inner", "inner?", "(inner | NUM)", "inner+"])
    end = rng.choice(['"y"', '"y"?', ""])
    outer = f'start: "x" {use} {end}'
    lines = [outer, "NUM: /[0-9]+/", "inner: %lark {", block(1, "  "), "}"]
    ignore = rng.choice(NESTED_IGNORES)
    return "\n".join(lines + ([ignore] if ignore else [])) + "\n"


def cases() -> list[dict]:
    """The grammars and strings (deterministic)."""
    from ministruct.engine.automaton import Automaton
    from ministruct.errors import MinistructError
    from ministruct.grammar.lark import parse_lark

    out: list[dict] = []
    grammars: list[tuple[str, str, int]] = [
        (name, (ROOT / "benchmarks" / "grammars" / name).read_text(), WALKS_PER_BENCH) for name in BENCH
    ]
    rng = random.Random(48)
    while len(grammars) < len(BENCH) + SMALL_GRAMMARS:
        text = small_grammar(rng)
        try:
            parse_lark(text)
            Automaton(parse_lark(text, lexer="cfl"))
        except MinistructError:
            continue
        grammars.append((f"small-{len(grammars) - len(BENCH)}", text, WALKS_PER_SMALL))
    rng = random.Random(4848)
    n = len(grammars)
    while len(grammars) < n + NESTED_GRAMMARS:
        text = nested_grammar(rng)
        try:
            parse_lark(text)
            Automaton(parse_lark(text, lexer="cfl"))
        except MinistructError:
            continue
        grammars.append((f"nested-{len(grammars) - n}", text, WALKS_PER_SMALL))
    for name, text, walks in grammars:
        auto = Automaton(parse_lark(text, lexer="cfl"))
        wrng = random.Random(name)
        seen: set[bytes] = set()
        for _ in range(walks * 3):
            s = cfl_walk(auto, wrng, 100)
            if s and s not in seen:
                seen.add(s)
            if len(seen) >= walks:
                break
        out.append({"name": name, "grammar": text, "strings": sorted(x.decode() for x in seen)})
    return out


def llguidance_verdict(grammar: str, text: str) -> tuple[int, bool]:
    """(bytes llguidance takes before refusing one, does it accept the whole text)."""
    import llguidance

    tok = llguidance_verdict.tok = getattr(llguidance_verdict, "tok", None) or llguidance.LLTokenizer("byte")
    m = llguidance.LLMatcher(tok, llguidance.grammar_from("lark", grammar), log_level=0)
    if m.is_error():
        raise RuntimeError(f"llguidance refuses the grammar: {m.get_error()}\n{grammar}")
    data = text.encode()
    for i, b in enumerate(data):
        if not m.consume_token(b):
            return i, False
    return len(data), bool(m.is_accepting())


def table() -> dict:
    groups = []
    for case in cases():
        verdicts = []
        for s in case["strings"]:
            viable, accepting = llguidance_verdict(case["grammar"], s)
            verdicts.append({"text": s, "viable": viable, "accepting": accepting})
        groups.append({"name": case["name"], "grammar": case["grammar"], "verdicts": verdicts})
    import llguidance

    return {"llguidance": llguidance.get_version() if hasattr(llguidance, "get_version") else "?", "groups": groups}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    new = table()
    text = json.dumps(new, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        same = TABLE.is_file() and TABLE.read_text(encoding="utf-8") == text
        print("same" if same else f"{TABLE} differs")
        return 0 if same else 1
    TABLE.write_text(text, encoding="utf-8")
    n = sum(len(g["verdicts"]) for g in new["groups"])
    print(f"wrote {TABLE}: {len(new['groups'])} grammars, {n} strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
