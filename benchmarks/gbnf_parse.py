"""Benchmark: parse a ~1 MB GBNF grammar (thousands of rules).

Prints the lexing time, Lark's own LALR parse (to a tree, no IR), ministruct's parse
with IR construction (Lark callbacks building the IR), and the analysis pass.
Target: the whole parse_gbnf well under a second.

    .venv/bin/python benchmarks/gbnf_parse.py [--size-mb 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lark import Lark

from ministruct.grammar import gbnf
from ministruct.grammar.analysis import check_grammar
from ministruct.grammar.ir import Grammar


def build_grammar(target_bytes: int) -> str:
    """A synthetic grammar: every construct of the dialect, many rules, comments and newlines."""
    parts = ['# synthetic benchmark grammar\nroot ::= r0 (ws r1)* "\\n"\nws ::= [ \\t\\n]{0,4}\n']
    i = 0
    size = len(parts[0])
    while size < target_bytes:
        rule = (
            f"r{i} ::= \"key-{i}\\u00e9\\\"\" ws ( r{i + 1} | [a-z0-9_\\-]+ | \"\\x41\"{{1,3}} ) |\n"
            f"  [^\"\\\\\\x00-\\x1F] . <[{i % 5000}]> !<|tok{i % 7}|> r{i + 2}? # alt {i}\n"
            f"r{i}-x ::= (\n    \"a\" ws\n    | \"b\"{{2,}} \"c\"*\n  ) r{i + 3}\n"
        )
        parts.append(rule)
        size += len(rule)
        i += 1
    parts.append("".join(f'r{j} ::= "end{j}"\n' for j in range(i, i + 4)))
    return "".join(parts)


def best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    text = build_grammar(int(args.size_mb * 1_000_000))
    lark_ir, _ = gbnf._parser()
    lark_tree = Lark(
        Path(gbnf.__file__).with_name("gbnf.lark").read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        postlex=gbnf._NewlineFilter(),
        maybe_placeholders=False,
    )
    n_tokens = sum(1 for _ in lark_tree.lex(text, dont_ignore=False))
    g = gbnf.parse_gbnf(text)
    t_lex = best_of(args.repeat, lambda: sum(1 for _ in lark_tree.lex(text)))
    t_tree = best_of(args.repeat, lambda: lark_tree.parse(text))
    t_ir = best_of(args.repeat, lambda: lark_ir.parse(text))
    t_check = best_of(args.repeat, lambda: check_grammar(Grammar(dict(g.rules))))
    t_total = best_of(args.repeat, lambda: gbnf.parse_gbnf(text))

    print(f"grammar: {len(text) / 1e6:.2f} MB, {len(g.rules)} rules, {n_tokens} tokens")
    print(f"lex only (lark contextual lexer + newline filter): {t_lex * 1000:8.1f} ms")
    print(f"lark LALR parse to a tree (no IR):                  {t_tree * 1000:8.1f} ms")
    print(f"lark LALR parse building the IR (our callbacks):    {t_ir * 1000:8.1f} ms")
    print(f"analysis (check_grammar):                           {t_check * 1000:8.1f} ms")
    print(f"parse_gbnf total:                                   {t_total * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
