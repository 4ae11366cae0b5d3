"""Grammar report: random walks, legal-set sizes and sample strings on a toy vocabulary."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ministruct.diagnostics.bench import sample_walks
from ministruct.diagnostics.grammar_info import BUCKETS, LegalSizes, grammar_info
from ministruct.engine.compile import compile_grammar
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.regex.parse import parse_regex

TOKENS = [b"", b"0", b"1", b"12", b"345", b"a", b"-", b"9", b"\xe2"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path / "cache"))


def compiled(pattern: str):
    vocab = Vocabulary.from_bytes(TOKENS, eog_ids=[0], control_text={0: "</s>"}, name="toy")
    return compile_grammar(parse_regex(pattern), vocab, use_cache=False)


def test_walks_produce_strings_of_the_language():
    c = compiled("[0-9]{2,5}(-[0-9])?")
    walks, found = sample_walks(c, n=20, max_steps=10, seed=1)
    sizes = LegalSizes(found)
    assert len(walks) == 20
    for w in walks:
        assert w.complete and re.fullmatch(r"[0-9]{2,5}(-[0-9])?", w.text), w
    assert len({w.text for w in walks}) > 1
    # sizes are exact mask sizes of the configurations reached
    assert sizes.n == len(sizes.sizes) >= 3
    assert all(1 <= s <= len(TOKENS) for s in sizes.sizes)
    assert int(np.asarray(c.mask(c.initial)).sum()) in sizes.sizes


def test_same_seed_same_walks():
    a, _ = sample_walks(compiled("[0-9]{1,8}"), n=5, seed=3)
    b, _ = sample_walks(compiled("[0-9]{1,8}"), n=5, seed=3)
    assert a == b


def test_forced_configurations_are_counted():
    c = compiled("-9")  # "-" then "9" then only end-of-generation
    walks, found = sample_walks(c, n=1, seed=0)
    sizes = LegalSizes(found)
    assert walks[0].text == "-9" and walks[0].n_tokens == 2
    assert sorted(sizes.sizes) == [1, 1, 1]
    assert sizes.histogram()[0] == ("1 (forced)", 3)


def test_histogram_buckets_cover_every_size():
    ls = LegalSizes([1, 2, 9, 10, 99, 100, 999, 1000, 9999, 10000, 262144])
    hist = dict(ls.histogram())
    assert sum(hist.values()) == ls.n
    assert list(hist) == [b[0] for b in BUCKETS]
    d = ls.to_dict()
    assert (d["min"], d["max"], d["configurations"]) == (1, 262144, 11)
    assert LegalSizes([]).to_dict()["median"] is None


def test_grammar_info_fields():
    c = compiled("[0-9]{4}")
    info = grammar_info(c, {"kind": "regex", "source": "<regex>", "text": "[0-9]{4}"}, walks=3, seed=0)
    d = info.to_dict()
    assert d["gbnf"] == parse_regex("[0-9]{4}").to_gbnf()
    assert d["rules"] == 1 and d["stats"]["nfa_states"] > 0
    assert len(d["samples"]) == 3 and d["n_logits"] == len(TOKENS)
