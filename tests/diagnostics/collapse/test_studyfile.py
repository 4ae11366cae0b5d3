"""The study file (studyfile.py): the bundled study holds the seed's six schema kinds,
two prompts each; mistakes are one-line errors naming the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ministruct.diagnostics.collapse.studyfile import load_study
from ministruct.errors import InputError
from ministruct.grammar.constraint import Constraint

BUNDLED = Path(__file__).resolve().parents[3] / "samples" / "study" / "study.toml"


def test_the_bundled_study_has_the_six_schema_kinds():
    spec = load_study(str(BUNDLED))
    assert [s.name for s in spec.schemas] == [
        "tight-enum",
        "integer",
        "free-string",
        "patterned-string",
        "mixed-object",
        "reasoning-first",
    ]
    assert all(len(s.prompts) == 2 for s in spec.schemas)
    assert spec.seeds == tuple(range(8)) and spec.conditions == ("shown", "withheld")
    assert spec.temperatures == (0.0, 0.3, 0.5, 0.7, 1.0, 1.5) and spec.top_ps == (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)
    by = {s.name: s.schema for s in spec.schemas}
    leaf = {k: next(iter(v["properties"].values())) for k, v in by.items() if len(v["properties"]) == 1}
    assert "enum" in leaf["tight-enum"] and leaf["integer"]["type"] == "integer"
    assert leaf["free-string"] == {"type": "string"} and "pattern" in leaf["patterned-string"]
    mixed = by["mixed-object"]["properties"]
    kinds = {("enum" if "enum" in v else v["type"]) for v in mixed.values()}
    assert kinds == {"string", "enum", "integer", "boolean", "array", "object"}
    first = by["reasoning-first"]["properties"]
    assert list(first)[0] == "reasoning" and {k: v for k, v in first.items() if k != "reasoning"} == mixed
    for s in spec.schemas:
        Constraint.from_json_schema(s.schema, source=s.name, marks=True)


def test_json_study_files_are_read_too(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(
        json.dumps({"seeds": [3, 4], "schemas": [{"name": "a", "schema": {"type": "integer"}, "prompts": ["x"]}]})
    )
    spec = load_study(str(p))
    assert spec.seeds == (3, 4) and spec.schemas[0].schema == {"type": "integer"}


@pytest.mark.parametrize(
    "text, where",
    [
        ('seed = 2\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]', "seed: unknown key"),
        ('seeds = 0\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]', "seeds: the count must be >= 1"),
        ('seeds = [1, -2]\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]', "seeds[1]: must be >= 0"),
        ('conditions = ["shown", "think"]\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]', "conditions[1]"),
        (
            '[grid]\ntop_ps = [0.5, "x"]\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]',
            "grid.top_ps[1]: must be a number",
        ),
        ('[[schemas]]\nname="a"\nschema={}\nprompts=[]', "schemas[0].prompts: give at least one prompt"),
        ('[[schemas]]\nname="a"\nprompts=["x"]', "schemas[0]: give `file` or `schema`"),
        ('[[schemas]]\nname="a"\nfile="nope.json"\nprompts=["x"]', "schemas[0].file: cannot read"),
        (
            '[[schemas]]\nname="a"\nschema={}\nprompts=["x"]\n[[schemas]]\nname="a"\nschema={}\nprompts=["y"]',
            "schemas[1].name",
        ),
        ("schemas = 3", "schemas: must be a list"),
        (
            'p_valid_particles = -1\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]',
            "p_valid_particles: must be in [0, 64]",
        ),
        (
            'p_valid_particles = 65\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]',
            "p_valid_particles: must be in [0, 64]",
        ),
        (
            'p_valid_particles = true\n[[schemas]]\nname="a"\nschema={}\nprompts=["x"]',
            "p_valid_particles: must be an integer",
        ),
        ("seeds = 3 3", "line 1, column 11"),
    ],
)
def test_mistakes_name_the_key(tmp_path, text, where):
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_study(str(p))
    assert str(e.value).startswith(str(p)) and where in str(e.value)
    assert "\n" not in str(e.value)
