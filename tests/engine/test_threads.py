"""One CompiledGrammar shared by matchers on several threads gives the masks a single thread gives."""

from __future__ import annotations

import random
import sys
import threading
import time

import numpy as np

from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.gbnf import parse_gbnf

JSON = r"""
root   ::= value
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( "," ws member )* )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] ){0,12} "\""
number ::= "-"? [0-9]{1,6} ( "." [0-9]+ )?
ws     ::= [ \n]{0,3}
"""


def vocabulary() -> Vocabulary:
    rng = random.Random(5)
    alphabet = list('{}[]",: \n\\-.0123456789abcdeflnrstu') + ["é", "ü", "\u2014"]
    toks = {c.encode() for c in alphabet}
    while len(toks) < 1500:
        toks.add("".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))).encode())
    toks.update({b"\xc3", b"\xa9", b"\xe2\x80"})
    ordered = sorted(toks)
    return Vocabulary.from_bytes(ordered + [b""], eog_ids=[len(ordered)])


def walks(compiled, n: int, steps: int) -> list[list[int]]:
    """Seeded random token paths (chosen on a private, single-threaded grammar)."""
    out = []
    for k in range(n):
        rng = np.random.default_rng(k)
        m, path = Matcher(compiled), []
        for _ in range(steps):
            legal = [t for t in np.flatnonzero(m.mask()).tolist() if t not in compiled.vocab.eog_ids]
            if not legal:
                break
            t = legal[rng.integers(len(legal))]
            m.advance(t)
            path.append(t)
        out.append(path)
    return out


def replay(compiled, path: list[int]) -> list[bytes]:
    m, out = Matcher(compiled), []
    for t in path:
        out.append(np.packbits(m.mask()).tobytes())
        m.advance(t)
    out.append(np.packbits(m.mask()).tobytes())
    return out


def test_masks_from_many_threads_agree_with_one_thread():
    vocab = vocabulary()
    grammar = parse_gbnf(JSON)
    paths = walks(compile_grammar(grammar, vocab, use_cache=False), 12, 30)
    want = [replay(compile_grammar(grammar, vocab, use_cache=False), p) for p in paths]

    for trial in range(4):  # a fresh grammar each time: every configuration is new to all threads
        shared = compile_grammar(grammar, vocab, use_cache=False)
        step = shared.automaton.step

        def yielding_step(config, byte):  # hand the GIL over in the middle of lazy work
            time.sleep(0)
            out = step(config, byte)
            time.sleep(0)
            return out

        shared.automaton.step = yielding_step
        got, errors = run_threads(shared, paths, 6)
        assert not errors, errors[0]
        assert sorted(got) == list(range(len(paths)))
        for i in range(len(paths)):
            assert got[i] == want[i], f"trial {trial}: path {i} differs from the single-threaded masks"


def run_threads(shared, paths, n: int) -> tuple[dict[int, list[bytes]], list[BaseException]]:
    got: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def work(worker: int) -> None:
        try:
            barrier.wait()
            for k in range(len(paths)):
                i = (k * 7 + worker * 5) % len(paths)  # every thread replays every path, in its own order
                masks = replay(shared, paths[i])
                if got.setdefault(i, masks) != masks:
                    raise AssertionError(f"two threads disagree on path {i}")
        except BaseException as e:  # reported by the caller
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=work, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    return got, errors
