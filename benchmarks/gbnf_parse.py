"""Benchmark: parse ~1 MB GBNF grammars; llama.cpp's own grammar parser is the peer.

First a mixed grammar (every construct of the dialect, comments, multi-line rules) with
the time split into lexing, Lark's own LALR loop (for reference), our driver of the same
table, and the analysis pass. Then grammars of other shapes, each about 1 MB: one big
alternation, a long sequence, many tiny rules, a deep chain of rules, long literals.
For each, parse_gbnf's time beside llama_sampler_init_grammar's (C++: parse plus its
own setup) on the bundled model's vocabulary, and the ratio. Target: well under a second.

    .venv/bin/python benchmarks/gbnf_parse.py [--size-mb 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import time
from types import SimpleNamespace
from typing import Callable

from ministruct.grammar.analysis import check_grammar
from ministruct.grammar.gbnf import parse as gbnf
from ministruct.grammar.gbnf.lexer import GbnfLexer
from ministruct.grammar.ir import Grammar

SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")  # tokens of the bundled model's vocabulary


def mixed(target: int) -> str:
    """Every construct of the dialect, many rules, comments and newlines."""
    parts = ['# synthetic benchmark grammar\nroot ::= r0 (ws r1)* "\\n"\nws ::= [ \\t\\n]{0,4}\n']
    i = 0
    size = len(parts[0])
    while size < target:
        rule = (
            f'r{i} ::= "key-{i}\\u00e9\\"" ws ( r{i + 1} | [a-z0-9_\\-]+ | "\\x41"{{1,3}} ) |\n'
            f'  [^"\\\\\\x00-\\x1F] . <[{i % 5000}]> !{SPECIAL[i % 3]} r{i + 2}? # alt {i}\n'
            f'r{i}-x ::= (\n    "a" ws\n    | "b"{{2,}} "c"*\n  ) r{i + 3}\n'
        )
        parts.append(rule)
        size += len(rule)
        i += 1
    parts.append("".join(f'r{j} ::= "end{j}"\n' for j in range(i, i + 4)))
    return "".join(parts)


def _count(target: int, per_item: int) -> int:
    return max(1, target // per_item)


SHAPES: dict[str, Callable[[int], str]] = {
    "one big alternation": lambda n: "root ::= " + " |\n  ".join(f'"word{i}"' for i in range(_count(n, 13))) + "\n",
    "long sequence": lambda n: "root ::= " + " ".join(f'"w{i}" [a-z]?' for i in range(_count(n, 17))) + "\n",
    "many tiny rules": lambda n: (
        "root ::= r0\n"
        + "".join(f'r{i} ::= "{i}" r{i + 1}?\n' for i in range(_count(n, 26)))
        + f'r{_count(n, 26)} ::= "x"\n'
    ),
    # llama.cpp expands a rule's first element when it sets up, so a chain that starts
    # with a reference costs it quadratic time; this one starts with a literal
    "deep chain of rules": lambda n: (
        "root ::= a0\n"
        + "".join(f'a{i} ::= "x" (a{i + 1} | "w") "y"\n' for i in range(_count(n, 32)))
        + f'a{_count(n, 32)} ::= "z"\n'
    ),
    "long literals": lambda n: (
        "root ::= " + " | ".join('"' + "abcdefghij" * 10 + str(i) + '"' for i in range(_count(n, 110))) + "\n"
    ),
}


def best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def llama_cpp_parser() -> "Callable[[str], None] | None":
    """llama.cpp's grammar parser, through llama-cpp-python, on the bundled model's vocabulary."""
    try:
        import llama_cpp

        from ministruct.decode.gguf import bundled_model_path

        llm = llama_cpp.Llama(str(bundled_model_path()), vocab_only=True, verbose=False)
    except Exception as e:  # the peer is optional here: say why it is missing
        print(f"(llama.cpp peer unavailable: {e})")
        return None
    vocab = llama_cpp.llama_model_get_vocab(llm.model)

    def parse(text: str) -> None:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root")
        if not sampler:
            raise RuntimeError("llama.cpp refused the grammar")
        llama_cpp.llama_sampler_free(sampler)

    parse.keep_alive = llm  # type: ignore[attr-defined]
    return parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    target = int(args.size_mb * 1_000_000)

    text = mixed(target)
    lark_loop = gbnf._parser()[0]
    source = SimpleNamespace(text=text)
    n_tokens = sum(1 for _ in GbnfLexer().lex(source, None))
    g = gbnf.parse_gbnf(text)
    t_lex = best_of(args.repeat, lambda: sum(1 for _ in GbnfLexer().lex(source, None)))
    t_lark = best_of(args.repeat, lambda: lark_loop.parse(text))
    t_check = best_of(args.repeat, lambda: check_grammar(Grammar(dict(g.rules))))
    t_total = best_of(args.repeat, lambda: gbnf.parse_gbnf(text))
    print(f"mixed grammar: {len(text) / 1e6:.2f} MB, {len(g.rules)} rules, {n_tokens} tokens")
    print(f"  lex only (GbnfLexer, newline rules included):  {t_lex * 1000:8.1f} ms")
    print(f"  Lark's own LALR loop building the IR:          {t_lark * 1000:8.1f} ms")
    print(f"  analysis (check_grammar):                      {t_check * 1000:8.1f} ms")
    print(f"  parse_gbnf total (our driver + analysis):      {t_total * 1000:8.1f} ms")
    print()

    peer = llama_cpp_parser()
    print(f"{'grammar (~1 MB each)':<24}{'MB':>6}{'tokens':>9}{'ours ms':>10}{'llama.cpp ms':>14}{'ratio':>8}")
    for name, make in {"mixed": mixed, **SHAPES}.items():
        text = make(target)
        n = sum(1 for _ in GbnfLexer().lex(SimpleNamespace(text=text), None))
        ours = best_of(args.repeat, lambda: gbnf.parse_gbnf(text))
        theirs = best_of(args.repeat, lambda: peer(text)) if peer else float("nan")
        print(f"{name:<24}{len(text) / 1e6:>6.2f}{n:>9}{ours * 1000:>10.1f}{theirs * 1000:>14.1f}{ours / theirs:>8.2f}")


if __name__ == "__main__":
    main()
