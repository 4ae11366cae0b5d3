"""Diversity and the free control (diversity.py) on hand-made outputs, computed by hand."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ministruct.diagnostics.collapse.diversity import diversity, entropy_bits, free_control, schema_fields

SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"enum": ["a", "b", "c", "d"]},
        "n": {"type": "integer"},
        "where": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
    "required": ["label", "n"],
}


def gen(output: str, cond: str = "shown", pi: int = 0):
    return SimpleNamespace(schema="s", prompt_index=pi, condition=cond, output=output, complete=True)


def test_fields_follow_objects_and_know_enums():
    assert schema_fields(SCHEMA) == {"/label": ["a", "b", "c", "d"], "/n": None, "/where/city": None}
    assert schema_fields({"enum": [1, 2]}) == {"": [1, 2]}


def test_entropy_by_hand():
    assert entropy_bits(["x", "x", "y", "z"]) == pytest.approx(1.5)
    assert entropy_bits(["x"] * 5) == 0.0


def test_diversity_over_seeds_of_one_prompt():
    outs = ['{"label":"a","n":1}', '{"label":"a","n":2}', '{"label":"b","n":1}', '{"label":"a","n":1}']
    rows = diversity([gen(o) for o in outs] + [gen('{"label":"c","n":1}', "withheld")], {"s": SCHEMA})
    shown = rows[0]
    assert (shown["condition"], shown["n"], shown["distinct_outputs"]) == ("shown", 4, 3)
    label, n, city = shown["fields"]
    assert label["distinct"] == 2 and label["used"] == 2 and label["enum_size"] == 4
    assert label["entropy_bits"] == pytest.approx(-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))
    assert label["max_bits"] == 2.0
    assert n["distinct"] == 2 and "enum_size" not in n
    assert city["values"] == {"(missing)": 4}
    assert rows[1]["condition"] == "withheld" and rows[1]["n"] == 1


def test_an_output_that_is_not_json_counts_as_invalid():
    rows = diversity([gen('{"label":"a","n":1}'), gen('{"label":"a"')], {"s": SCHEMA})
    assert rows[0]["fields"][0]["values"] == {'"a"': 1, "(invalid)": 1}


def test_free_control_parses_fences_and_validates():
    runs = [
        SimpleNamespace(schema="s", prompt_index=0, output='{"label":"a","n":1}'),
        SimpleNamespace(schema="s", prompt_index=0, output='```json\n{"label":"e","n":1}\n```'),
        SimpleNamespace(schema="s", prompt_index=1, output='```\n{"label":"b","n":3}\n```'),
        SimpleNamespace(schema="s", prompt_index=1, output="Sure! Here is the JSON: {"),
    ]
    rows = free_control(runs, {"s": SCHEMA})
    assert rows[0] == {"schema": "s", "n": 4, "parsed": 1, "fenced": 3, "valid": 2, "distinct_outputs": 4}
    assert rows[-1]["schema"] == "all" and rows[-1]["valid"] == 2
