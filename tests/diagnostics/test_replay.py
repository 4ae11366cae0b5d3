"""Independent recomputation of a real trace.

A real `gen --trace --trace-legal` run is replayed with plain llama-cpp-python (no
ministruct code): evaluate the header's prompt ids, then each step's token id, read
the logits with llama_get_logits_ith, and recompute every diagnostic with plain numpy.
The legal ids are checked independently against the `regex` package (partial matching).
The run is token by token (`--no-fast-forward`): plain llama-cpp-python evaluates one
token at a time, and a batch's rows may differ from those in the last bits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import regex  # noqa: E402  (a test dependency: no skip)

PATTERN = r"(yes|no)\. [a-z ]{30,60}\."
TEMPERATURE, TOP_P = 1.0, 0.9


def _lse(x: np.ndarray) -> float:
    m = x.max()
    return float(m + np.log(np.sum(np.exp(x - m))))


def _nucleus(z: np.ndarray, ids: np.ndarray, t: float, top_p: float) -> set[int]:
    """Plain full-sort nucleus of softmax(z / t); ties broken by lowest id."""
    w = z / t
    p = np.exp(w - w.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")  # ids ascending inside ties
    cum = np.cumsum(p[order])
    k = int(np.argmax(cum >= top_p)) + 1 if cum[-1] >= top_p else len(order)
    return set(ids[order[:k]].tolist())


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    from ministruct.decode.gguf import bundled_model_path

    d = tmp_path_factory.mktemp("replay")
    path = d / "trace.jsonl"
    env = dict(os.environ, MINISTRUCT_CACHE_DIR=str(d / "cache"))
    cmd = [
        sys.executable,
        "-m",
        "ministruct",
        "gen",
        "Is water wet? Answer yes or no, then say why.",
        "--regex",
        PATTERN,
        "--temperature",
        str(TEMPERATURE),
        "--top-p",
        str(TOP_P),
        "--seed",
        "2",
        "--max-tokens",
        "40",
        "--trace",
        str(path),
        "--trace-legal",
        "--no-progress",
        "--no-fast-forward",
        "--model",
        str(bundled_model_path()),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return records, proc.stdout


@pytest.mark.model
def test_trace_shape(trace):
    records, stdout = trace
    assert [r["type"] for r in records][0] == "header"
    assert records[-1]["type"] == "summary"
    assert all(r["v"] == 1 for r in records)
    steps = [r for r in records if r["type"] == "step"]
    assert len(steps) == records[-1]["steps"] >= 5
    assert records[-1]["output"] == stdout.rstrip("\n")


@pytest.mark.model
def test_replay_with_plain_llama_cpp(trace, vocab):
    import llama_cpp

    records, _ = trace
    header = records[0]
    steps = [r for r in records if r["type"] == "step"]
    llm = llama_cpp.Llama(model_path=header["model_path"], n_ctx=2048, verbose=False)
    n_logits = header["n_logits"]
    eog = set(int(i) for i in vocab.eog_ids)

    def logits() -> np.ndarray:
        ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        return np.array(np.ctypeslib.as_array(ptr, shape=(n_logits,)), dtype=np.float64)

    llm.eval(header["prompt_token_ids"])
    text = ""
    n_forced = n_collapsed = n_changed = 0
    for rec in steps:
        z = logits()
        legal = np.asarray(rec["legal"], dtype=np.int64)

        # the legal set, independently: partial regex matching on every token's text
        expect = []
        for i, tok in enumerate(vocab.tokens):
            if i in eog:
                if regex.fullmatch(PATTERN, text):
                    expect.append(i)
                continue
            if not tok or i in vocab.control_ids:
                continue
            try:
                piece = tok.decode("utf-8")
            except UnicodeDecodeError:
                continue  # the language is ASCII: a partial character never fits
            if regex.fullmatch(PATTERN, text + piece, partial=True):
                expect.append(i)
        assert legal.tolist() == expect, f"step {rec['step']}"

        lse_all, lse_legal = _lse(z), _lse(z[legal])
        assert rec["legal_count"] == len(legal)
        assert rec["kl"] == pytest.approx(lse_all - lse_legal, abs=1e-4)
        assert rec["Z"] == pytest.approx(np.exp(lse_legal - lse_all), abs=1e-4)
        assert rec["tag"] == ("forced" if len(legal) == 1 else "free")
        raw = _nucleus(z, np.arange(n_logits), TEMPERATURE, TOP_P)
        masked = _nucleus(z[legal], legal, TEMPERATURE, TOP_P)
        assert rec["nucleus_raw"] == len(raw)
        assert rec["nucleus_masked"] == len(masked)
        assert rec["nucleus_changed"] == (raw != masked)
        assert rec["collapsed"] == (rec["tag"] == "free" and len(masked) == 1)
        assert rec["top_changed"] == (int(np.argmax(z)) != int(legal[np.argmax(z[legal])]))
        assert rec["token_id"] in set(legal.tolist())
        n_forced += rec["tag"] == "forced"
        n_collapsed += rec["collapsed"]
        n_changed += rec["nucleus_changed"]

        if rec["token_id"] in eog:
            break
        text += vocab.tokens[rec["token_id"]].decode("utf-8")
        llm.eval([rec["token_id"]])

    summary = records[-1]
    assert summary["forced"] == n_forced
    assert summary["collapsed"] == n_collapsed
    assert summary["nucleus_changed"] == n_changed
    assert text == summary["output"]
    llm.close()
