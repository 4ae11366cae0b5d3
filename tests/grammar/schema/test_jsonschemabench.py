"""JSONSchemaBench (MaskBench half in ../shared/suites/jsonschemabench) on a deterministic
sample: every 100th schema by file name (benchmarks/schema_coverage.py runs them all).

Instances are serialized as MaskBench does (`json.dumps(data)`, ", " and ": "), so the
grammar uses whitespace="flexible"; key order is canonicalized with canonical_order
(MaskBench data already follows `properties` order). Non-compiling schemas must raise
SchemaError; no invalid instance may be accepted; >= 97% of valid ones must be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ministruct.engine.automaton import accepts
from ministruct.errors import CompileLimitError, SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

BENCH = Path(__file__).resolve().parents[3] / ".." / "shared" / "suites" / "jsonschemabench"
EVERY = 100


@pytest.mark.skipif(not BENCH.is_dir(), reason="JSONSchemaBench not found at ../shared/suites/jsonschemabench")
def test_bench_sample():
    files = sorted(BENCH.glob("*.json"))[::EVERY]
    compiled = valid = valid_ok = too_big = 0
    false_accepts = []
    for f in files:
        d = json.loads(f.read_text())
        try:
            g = schema_to_grammar(d["schema"], whitespace="flexible", extra_properties="spec")
        except SchemaError as e:
            assert "\n" not in str(e)
            continue
        compiled += 1
        for t in d.get("tests", []):
            try:
                got = accepts(g, json.dumps(canonical_order(t["data"], d["schema"])))
            except CompileLimitError:  # the engine's size bound, not the converter's
                too_big += 1
                break
            if t["valid"]:
                valid += 1
                valid_ok += got
            elif got:
                false_accepts.append(f.name)
    assert false_accepts == []
    assert compiled / len(files) >= 0.75, f"compiled {compiled}/{len(files)}"
    assert valid and valid_ok / valid >= 0.97, f"valid accepted {valid_ok}/{valid}"
    assert too_big <= 2
