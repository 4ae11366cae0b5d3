"""Generation under JSON Schemas on the real model: every completed output validates.

The judge is the `jsonschema` package (Draft 2020-12, with its format checker, and
`multipleOf` with the standard's meaning), not ministruct. Schemas: samples/conj.json and 30 real schemas from JSONSchemaBench,
picked deterministically among those ministruct compiles.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.errors import MinistructError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.jobs.job import GenerationJob

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO.parent / "shared" / "suites" / "jsonschemabench"
N_SCHEMAS = 30


def validate(schema, value) -> None:
    """`multipleOf` as JSON Schema reads it (schema/multiples.py: the package divides floats,
    and would call 1230.55 no multiple of 0.01)."""
    from ministruct.grammar.schema.multiples import exact_validator

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    exact_validator(cls)(schema, format_checker=cls.FORMAT_CHECKER).validate(value)


def run(model, schema, prompt: str, max_tokens: int, seed: int = 0):
    g = schema_to_grammar(schema, whitespace="compact", source="<test>")
    job = GenerationJob(
        model,
        Constraint("schema", g, "<test>", json.dumps(schema), schema=schema),
        SamplingParams(temperature=0.7, top_p=0.9, seed=seed),
        max_tokens=max_tokens,
    )
    return job.run(prompt)


def test_conj_outputs_validate(model):
    schema = json.loads((REPO / "samples" / "conj.json").read_text())
    done = 0
    for seed in range(3):
        res = run(model, schema, "Conjugate 'comer', 3rd person, future", 120, seed)
        if res.complete:
            done += 1
            validate(schema, json.loads(res.output))
            assert res.json_value == json.loads(res.output)
    assert done >= 2


def _bench_schemas():
    if not BENCH.is_dir():
        pytest.skip(f"JSONSchemaBench not found at {BENCH}")
    picked = []
    for path in sorted(BENCH.glob("*.json"))[::37]:
        schema = json.loads(path.read_text())
        schema = schema.get("schema", schema) if isinstance(schema, dict) else schema
        try:
            schema_to_grammar(schema, source=path.name)
        except MinistructError:
            continue
        picked.append((path.name, schema))
        if len(picked) == N_SCHEMAS:
            break
    return picked


def test_bench_schema_outputs_validate(model):
    picked = _bench_schemas()
    assert len(picked) == N_SCHEMAS
    completed = 0
    for name, schema in picked:
        try:
            res = run(model, schema, "Give one example instance as JSON.", 160)
        except MinistructError as e:  # an engine limit is reported, never a wrong output
            pytest.fail(f"{name}: {e}")
        if res.complete:
            completed += 1
            validate(schema, json.loads(res.output))
    assert completed >= N_SCHEMAS // 2, completed
