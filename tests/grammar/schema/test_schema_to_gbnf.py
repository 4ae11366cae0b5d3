"""`convert --schema S --to gbnf` emits GBNF that llama.cpp accepts and that means the same.

For samples/conj.json and a deterministic sample of JSONSchemaBench schemas: llama.cpp
must load the printed grammar, and on every suite instance (compact JSON, keys in the
schema's order) llama.cpp's verdict on the printed GBNF equals ministruct's on its own
grammar and, for valid instances, says yes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from oracles import LlamaGrammarOracle, single_byte_tokens  # tests/ is on sys.path

from ministruct.engine.automaton import accepts
from ministruct.errors import MinistructError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO.parent / "shared" / "suites" / "jsonschemabench"
N_SCHEMAS = 25


@pytest.fixture(scope="module")
def llama():
    import llama_cpp

    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    model = Model.load(bundled_model_path(), vocab_only=True)
    vocab = model.vocabulary
    llm = llama_cpp.Llama(str(model.path), vocab_only=True, verbose=False)
    yield llama_cpp.llama_model_get_vocab(llm.model), len(vocab), single_byte_tokens(vocab), min(vocab.eog_ids)
    llm.close()


def compare(llama, schema, instances) -> int:
    """Assert agreement on every usable instance; return how many were compared."""
    vocab_p, n, byte_token, eog = llama
    g = schema_to_grammar(schema, whitespace="compact", source="<test>")
    gbnf = g.to_gbnf()
    assert LlamaGrammarOracle.accepts_grammar(vocab_p, gbnf), gbnf[:500]
    compared = 0
    for value, valid in instances:
        try:
            text = json.dumps(canonical_order(value, schema), separators=(",", ":"), ensure_ascii=False)
        except (MinistructError, TypeError, ValueError):
            continue
        data = text.encode()
        if len(data) > 400 or any(b not in byte_token for b in data) or b"\x00" in data:
            continue  # keeps the byte-by-byte oracle fast; NUL ends llama.cpp's text
        oracle = LlamaGrammarOracle(vocab_p, n, gbnf)
        try:
            theirs = oracle.accepts_text(data, byte_token, eog)
        finally:
            oracle.close()
        ours = accepts(g, text)
        assert ours == theirs, (text, ours, theirs)
        compared += 1
    return compared


def test_conj_gbnf_loads_in_llama_cpp_and_agrees(llama):
    schema = json.loads((REPO / "samples" / "conj.json").read_text())
    good = {"verb": "comer", "tense": "futuro", "person": "3rd", "form": "comerá"}
    props = schema["properties"]
    good = {k: (props[k]["enum"][0] if "enum" in props[k] else v) for k, v in good.items()}
    bad = [dict(good, verb="kaboom"), {k: good[k] for k in list(good)[:2]}, dict(good, extra=1)]
    assert compare(llama, schema, [(good, True)] + [(b, False) for b in bad]) == 4


def test_bench_schemas_gbnf_loads_in_llama_cpp_and_agrees(llama):
    if not BENCH.is_dir():
        pytest.skip(f"JSONSchemaBench not found at {BENCH}")
    done = compared = 0
    for path in sorted(BENCH.glob("*.json"))[5::53]:
        case = json.loads(path.read_text())
        try:
            schema_to_grammar(case["schema"], source=path.name)
        except MinistructError:
            continue
        compared += compare(llama, case["schema"], [(t["data"], t["valid"]) for t in case.get("tests", [])])
        done += 1
        if done == N_SCHEMAS:
            break
    assert done == N_SCHEMAS and compared >= N_SCHEMAS
