"""Exactness on the real SmolLM2 vocabulary: our legal sets equal llama.cpp's grammar sampler's.

Along seeded random walks through llama.cpp's own reference grammars, at every step
the Matcher's mask must equal the set of tokens `LlamaGrammarOracle` (llama.cpp's
GBNF sampler on a vocabulary-only model) lets through. Both engines are driven with
the same token, drawn uniformly from the tokens both allow.

Documented differences, excluded from the equality and checked separately:
- non-EOG control tokens: llama.cpp treats them as their text (`<|im_start|>` inside
  a JSON string is allowed); ministruct never allows them;
- tokens llama.cpp cannot see as text: empty pieces and pieces whose first byte is 0
  (it reads the piece as a C string); SmolLM2 has none that are not control tokens,
  and the test asserts the exclusion stays tiny;
- tokens ending in an incomplete UTF-8 sequence: llama.cpp's partial-character check
  (`llama_grammar_match_partial_char`) refuses the partial bytes under a negated class
  as soon as *one* excluded code point shares them (after `- ` in list.gbnf it refuses
  b" \xe2\x80" because U+2028 starts that way, though U+2014 does too and is
  allowed). ministruct is exact there. Such a token allowed by us alone passes only
  when llama.cpp itself allows a longer token that starts with its bytes, i.e.
  llama.cpp's own language proves the prefix can be completed.
End-of-generation tokens are compared: both allow them exactly when the grammar is complete.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from oracles import LlamaGrammarOracle  # tests/ is on sys.path (rootdir conftest)

from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.grammar.gbnf.parse import parse_gbnf

pytestmark = pytest.mark.model

GRAMMARS = Path(__file__).resolve().parents[2] / ".." / "shared" / "suites" / "llamacpp" / "grammars"
# (grammar, walks, steps per walk); an oracle step costs ~5-30 ms on 49k tokens
PLAN = [(name, 3, 40) for name in ("json", "arithmetic", "json_arr", "list", "c", "chess", "english", "japanese")]


@pytest.fixture(scope="module")
def llama_side():
    """(llama vocab pointer, n_tokens, our Vocabulary) from one vocabulary-only load."""
    import llama_cpp

    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    model = Model.load(bundled_model_path(), vocab_only=True)  # a required dependency: no skip
    llm = llama_cpp.Llama(str(model.path), vocab_only=True, verbose=False)
    vocab_p = llama_cpp.llama_model_get_vocab(llm.model)
    n = int(llama_cpp.llama_vocab_n_tokens(vocab_p))
    yield vocab_p, n, model.vocabulary
    llm.close()
    model.close()


def comparable_ids(vocab, n: int) -> np.ndarray:
    """Token ids where the two engines must agree (see the module docstring)."""
    keep = np.ones(n, dtype=bool)
    for i in vocab.control_ids - vocab.eog_ids:
        keep[i] = False
    for i in range(min(n, vocab.n_tokens)):
        t = vocab.tokens[i]
        if i not in vocab.control_ids and (not t or t[0] == 0):
            keep[i] = False
    keep[vocab.n_tokens :] = False  # padding rows: never legal in ours, not tokens in llama.cpp
    return keep


def incomplete_utf8_tail(data: bytes) -> bool:
    """Does `data` end inside a UTF-8 sequence (a lead byte without all its continuations)?"""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for the lead
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return need > back
    return False


def completed_by_llamacpp(vocab, token: int, theirs: np.ndarray) -> bool:
    """Token ends mid-character and llama.cpp allows a longer token extending its bytes."""
    data = vocab.tokens[token]
    if not incomplete_utf8_tail(data):
        return False
    return any(
        len(vocab.tokens[j]) > len(data) and vocab.tokens[j].startswith(data)
        for j in np.flatnonzero(theirs[: vocab.n_tokens])
    )


def describe(vocab, ids: np.ndarray) -> list:
    return [(int(i), vocab.tokens[i] if i < vocab.n_tokens else None) for i in ids[:8]]


@pytest.mark.parametrize("name,walks,steps", PLAN, ids=[p[0] for p in PLAN])
def test_legal_sets_equal_llamacpp_along_random_walks(llama_side, name, walks, steps):
    path = GRAMMARS / f"{name}.gbnf"
    if not path.exists():
        pytest.skip(f"{path} is missing (the llama.cpp suite is not checked out next to the repo)")
    vocab_p, n, vocab = llama_side
    text = path.read_text(encoding="utf-8")
    assert LlamaGrammarOracle.accepts_grammar(vocab_p, text), f"llama.cpp refuses {name}.gbnf"
    assert vocab.n_logits == n
    keep = comparable_ids(vocab, n)
    assert (~keep[: vocab.n_tokens]).sum() <= len(vocab.control_ids) + 8
    never = np.zeros(n, dtype=bool)
    never[list(vocab.control_ids - vocab.eog_ids)] = True
    eog = np.asarray(sorted(vocab.eog_ids))

    compiled = compile_grammar(parse_gbnf(text, source=path.name), vocab, use_cache=False)
    for walk in range(walks):
        rng = np.random.default_rng(1000 * walk + len(name))
        matcher = Matcher(compiled)
        oracle = LlamaGrammarOracle(vocab_p, n, text)
        out = b""
        try:
            for step in range(steps):
                ours = np.asarray(matcher.mask())
                theirs = oracle.legal()
                where = f"{name}, walk {walk}, step {step}, after {out[-60:]!r}"
                assert not (ours & never).any(), f"{where}: a non-EOG control token is legal"
                assert ours[eog].any() == matcher.is_accepting(), where
                diff = (ours != theirs) & keep
                for i in np.flatnonzero(diff & ours):
                    if completed_by_llamacpp(vocab, int(i), theirs):
                        diff[i] = False
                assert not diff.any(), (
                    f"{where}: ours only {describe(vocab, np.flatnonzero(diff & ours))}, "
                    f"llama.cpp only {describe(vocab, np.flatnonzero(diff & theirs))}"
                )
                both = np.flatnonzero(ours & theirs & keep)
                assert both.size, f"{where}: no legal token"
                token = int(both[rng.integers(both.size)])
                if token in vocab.eog_ids:  # complete: start again
                    oracle.close()
                    oracle = LlamaGrammarOracle(vocab_p, n, text)
                    matcher.reset()
                    out = b""
                    continue
                oracle.accept(token)  # only ever a token llama.cpp allows (it aborts otherwise)
                matcher.advance(token)
                out += vocab.tokens[token]
        finally:
            oracle.close()
