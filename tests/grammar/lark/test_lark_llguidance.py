"""Against llguidance itself (the `bench` extra), on the bundled model's tokenizer: where
its greedy lexer (and ministruct's default reading) rejects strings of the context-free
language (`lexer="cfl"`), and that grammars printed by `convert --to lark` run there unchanged."""

from __future__ import annotations

import warnings

import pytest

from ministruct.check.grammar import check_text
from ministruct.grammar.constraint import load_constraint
from ministruct.grammar.lark import grammar_to_lark, parse_lark

llguidance = pytest.importorskip("llguidance")
pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llg_accepts():
    import llguidance.llamacpp

    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    model = Model.load(bundled_model_path(), vocab_only=True)
    vocab = model.vocabulary
    with warnings.catch_warnings():  # llguidance reads each token with a call llama-cpp-python deprecates
        warnings.filterwarnings("ignore", "llama_token_get_attr is deprecated", DeprecationWarning)
        tok = llguidance.llamacpp.lltokenizer_from_vocab(
            model._vocab_p, n_vocab=vocab.n_logits, eos_token=sorted(vocab.eog_ids)
        )

    def accepts(grammar: str, text: str, _keep=model) -> bool:  # the tokenizer reads the model's vocabulary
        m = llguidance.LLMatcher(tok, llguidance.grammar_from("lark", grammar), log_level=0)
        assert not m.is_error(), m.get_error()
        return all(m.consume_token(t) for t in tok.tokenize_str(text)) and m.is_accepting()

    return accepts


GREEDY = [
    ("start: WORD WORD\nWORD: /[a-z]+/", "ab"),  # WORD takes "ab" whole, no second WORD is left
    ('start: ("a" | "ab") "bc"', "abc"),  # "ab" is lexed, then "c" is no "bc"
    ("start: A B\nA: /a+/\nB: /a/", "aaa"),
]


@pytest.mark.parametrize("grammar, text", GREEDY)
def test_greedy_lexer_rejects_what_the_language_holds(llg_accepts, grammar, text):
    assert check_text(parse_lark(grammar, lexer="cfl"), text).accepted
    assert not llg_accepts(grammar, text)
    assert not check_text(parse_lark(grammar), text).accepted  # the default reading is llguidance's


@pytest.mark.parametrize(
    "grammar, text, verdict",
    [
        ('%import common.WS\n%ignore WS\nstart: "a" "b"', "a  b", True),
        ('%import common.WS\n%ignore WS\nstart: "a" "b"', "a b ", False),  # no gap after the last lexeme
        ('%import common.WS\n%ignore WS\nstart: "a" "b"', " ab", False),
        ('%llguidance {"allow_initial_skip": true}\n%ignore " "\nstart: "a" "b"', " a b", True),
        ('start: "x" %json {"type": "integer"}', "x12", True),
        ('start: "x" %json {"type": "integer"}', "x1.5", False),
        ("start: T\nT: /[a-c]+/ & ~/.*ab.*/", "acba", True),
        ("start: T\nT: /[a-c]+/ & ~/.*ab.*/", "cab", False),
        ('start: "SELECT"i', "ſelect", True),  # Unicode simple case folding: ſ is s
        ('start: "LINK"i', "l\u0131nk", False),  # ... but dotless ı is not i (Python's re says it is)
    ],
)
def test_agrees_with_llguidance(llg_accepts, grammar, text, verdict):
    assert check_text(parse_lark(grammar), text).accepted is verdict
    assert llg_accepts(grammar, text) is verdict


@pytest.mark.parametrize(
    "kind, value, good, bad",
    [
        ("grammar", "json", '{"a": [1, true, "x"]}', '{"a": [1,]}'),
        ("grammar", "arithmetic", "(1+2)*3", "(1+"),
        ("regex", "[a-z]+@[a-z]+\\.(com|org)", "me@mail.com", "me@mail.net"),
    ],
)
def test_printed_grammars_run_in_llguidance(llg_accepts, kind, value, good, bad):
    text = grammar_to_lark(load_constraint(**{kind: value}).grammar)
    assert llg_accepts(text, good) and not llg_accepts(text, bad)


@pytest.fixture(scope="module")
def llg_side():
    import llguidance.llamacpp

    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    model = Model.load(bundled_model_path(), vocab_only=True)
    vocab = model.vocabulary
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "llama_token_get_attr is deprecated", DeprecationWarning)
        tok = llguidance.llamacpp.lltokenizer_from_vocab(
            model._vocab_p, n_vocab=vocab.n_logits, eos_token=sorted(vocab.eog_ids)
        )
    yield model, vocab, tok


@pytest.mark.parametrize("name", ["sql_select.lark", "python_expr.lark"])
def test_masks_equal_llguidance_s_along_walks(llg_side, name):
    """The benchmark grammars on SmolLM2, read greedily (the default): at every step of a
    random walk the legal text tokens are llguidance's (its special tokens aside)."""
    from pathlib import Path

    import llguidance.numpy as lnp
    import numpy as np

    from ministruct.engine.compile import compile_grammar

    model, vocab, tok = llg_side
    text = (Path(__file__).resolve().parents[3] / "benchmarks" / "grammars" / name).read_text()
    compiled = compile_grammar(parse_lark(text), vocab, use_cache=False)
    special = np.zeros(vocab.n_logits, dtype=bool)
    special[[i for i in range(min(tok.vocab_size, vocab.n_logits)) if tok.is_special_token(i)]] = True
    special[sorted(vocab.eog_ids)] = True
    bitmask = lnp.allocate_token_bitmask(1, tok.vocab_size)
    steps = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        m = llguidance.LLMatcher(tok, llguidance.grammar_from("lark", text), log_level=0)
        cid = compiled.initial
        for _ in range(40):
            ours = np.asarray(compiled.mask(cid))
            lnp.fill_next_token_bitmask(m, bitmask)
            bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.n_logits].astype(bool)
            diff = np.flatnonzero((ours != bits) & ~special)
            assert not len(diff), (name, seed, [(int(t), vocab.tokens[t], bool(ours[t])) for t in diff[:8]])
            steps += 1
            text_ids = np.flatnonzero(ours & ~special)
            if not len(text_ids) or (compiled.is_accepting(cid) and rng.random() < 0.1):
                break
            t = int(text_ids[rng.integers(len(text_ids))])
            assert m.consume_token(t)
            cid = compiled.step_token(cid, t)
    assert steps >= 30
