"""Independent oracles the tests compare ministruct against (test code only).

- LlamaGrammarOracle: llama.cpp's own GBNF sampler through llama-cpp-python's
  low-level API, on a vocabulary-only model.
- brute_force_mask: every token's bytes stepped through the automaton (Automaton.step),
  and small_vocabulary, the hand-made vocabularies it is cheap on.
- bfs_cost: the fewest tokens that complete a configuration, by breadth-first search.
"""

from __future__ import annotations

import ctypes

import numpy as np

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


def brute_force_mask(compiled, cid: int) -> np.ndarray:
    """Legal tokens of a CompiledGrammar in configuration `cid`, by stepping the automaton
    over every token's bytes (no table, no trie, no walk)."""
    config = compiled.configs[cid]
    out = np.zeros(compiled.vocab.n_logits, dtype=bool)
    for t in compiled.vocab.text_ids.tolist():
        out[t] = bool(compiled.automaton.step_bytes(config, compiled.vocab.tokens[t]))
    if compiled.is_accepting(cid):
        out[compiled.eog] = True
    return out


def small_vocabulary(
    seed: int, chars: str, words: tuple[str, ...], word_chars: str, size: int, p_word: float, longest: int
):
    """Every character of `chars`, the `words`, and random strings of 2..`longest` characters
    (drawn from `word_chars` with probability `p_word`, else from `chars`) up to `size`
    tokens, then an empty end-of-generation token."""
    import random

    from ministruct.engine.vocab import Vocabulary

    rng = random.Random(seed)
    toks = {c.encode() for c in chars} | {w.encode() for w in words}
    while len(toks) < size:
        pool = word_chars if rng.random() < p_word else chars
        toks.add("".join(rng.choice(pool) for _ in range(rng.randint(2, longest))).encode())
    ordered = sorted(toks)
    return Vocabulary.from_bytes(ordered + [b""], eog_ids=[len(ordered)])


def single_byte_tokens(vocab) -> dict[int, int]:
    """byte -> the id of a token made of exactly that byte (where the vocabulary has one)."""
    out: dict[int, int] = {}
    for i, t in enumerate(vocab.tokens):
        if len(t) == 1 and i not in vocab.control_ids and t[0] not in out:
            out[t[0]] = i
    return out


class LlamaGrammarOracle:
    """Legal token ids according to llama.cpp's grammar sampler."""

    def __init__(self, llama_vocab, n_tokens: int, gbnf: str, root: str = "root") -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self._vocab = llama_vocab
        self.n_tokens = n_tokens
        self.gbnf = gbnf
        self.root = root
        self._sampler = llama_cpp.llama_sampler_init_grammar(llama_vocab, gbnf.encode(), root.encode())
        if not self._sampler:
            raise ValueError("llama.cpp refused the grammar")
        self._buf = np.zeros(n_tokens, dtype=_TOKEN_DATA)

    @classmethod
    def accepts_grammar(cls, llama_vocab, gbnf: str, root: str = "root") -> bool:
        import llama_cpp

        s = llama_cpp.llama_sampler_init_grammar(llama_vocab, gbnf.encode(), root.encode())
        if not s:
            return False
        llama_cpp.llama_sampler_free(s)
        return True

    def legal(self) -> np.ndarray:
        """Bool array over the tokenizer's ids: True where llama.cpp allows the token."""
        lc = self._llama_cpp
        self._buf["id"] = np.arange(self.n_tokens, dtype=np.int32)
        self._buf["logit"] = 0.0
        self._buf["p"] = 0.0
        ptr = self._buf.ctypes.data_as(ctypes.POINTER(lc.llama_token_data))
        arr = lc.llama_token_data_array(ptr, self.n_tokens, -1, False)
        lc.llama_sampler_apply(self._sampler, ctypes.byref(arr))
        out = np.zeros(self.n_tokens, dtype=bool)
        ok = np.isfinite(self._buf["logit"])
        out[self._buf["id"][ok]] = True
        return out

    def allows(self, token_id: int) -> bool:
        """Does llama.cpp allow this one token next? (a one-candidate apply: fast)"""
        lc = self._llama_cpp
        one = np.zeros(1, dtype=_TOKEN_DATA)
        one["id"] = token_id
        arr = lc.llama_token_data_array(one.ctypes.data_as(ctypes.POINTER(lc.llama_token_data)), 1, -1, False)
        lc.llama_sampler_apply(self._sampler, ctypes.byref(arr))
        return bool(np.isfinite(one["logit"][0]))

    def accepts_text(self, data: bytes, byte_token: dict[int, int], eog: int) -> bool:
        """llama.cpp's verdict on a whole text fed one byte at a time, each as its
        single-byte token (so llama.cpp's own partial-UTF-8 handling is used), then
        end-of-generation. Use a fresh oracle per text."""
        for b in data:
            tok = byte_token[b]
            if not self.allows(tok):
                return False
            self.accept(tok)
        return self.allows(eog)

    def accept(self, token_id: int) -> None:
        self._llama_cpp.llama_sampler_accept(self._sampler, token_id)

    def close(self) -> None:
        if self._sampler:
            self._llama_cpp.llama_sampler_free(self._sampler)
            self._sampler = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def bfs_cost(automaton, config, pieces: list[bytes], limit: int) -> int:
    """Fewest tokens among `pieces` that complete `config`: breadth-first over the automaton
    (INF when none does within `limit`)."""
    from ministruct.engine.budget import INF

    frontier, seen = [config], {config}
    for depth in range(limit + 1):
        if any(automaton.is_accepting(c) for c in frontier):
            return depth
        nxt = []
        for c in frontier:
            for piece in pieces:
                d = automaton.step_bytes(c, piece)
                if d and d not in seen:
                    seen.add(d)
                    nxt.append(d)
        if not nxt:
            return INF
        frontier = nxt
    return INF
