"""`ministruct collapse` end to end (subprocess), its flag checks, and several --schema."""

from __future__ import annotations

import json

import pytest

from cli.conftest import REPO, assert_one_line_error
from ministruct.cli.constraint_options import ConstraintFlags
from ministruct.errors import UsageError

PROMPT = "Conjugate 'comer', 3rd person, future"
KEYS = {
    "generation": {"schema", "prompt", "condition", "seed", "complete", "n_steps", "n_free", "n_forced"},
    "cell": {
        "schema",
        "condition",
        "temperature",
        "top_p",
        "free_steps",
        "collapsed",
        "pooled_rate",
        "per_generation",
        "nucleus_changed",
        "top_changed",
        "mean_Z",
        "pearson_Z_collapsed",
    },
    "paired": {
        "schema",
        "n_pairs",
        "mean_Z_shown",
        "mean_Z_withheld",
        "mean_paired_drop",
        "collapse_shown",
        "collapse_withheld",
    },
}


def _rate(x):
    return x is None or (isinstance(x, float) and 0.0 <= x <= 1.0)


@pytest.mark.model
def test_two_schemas_report_shape_and_consistency(run_cli, tmp_path):
    yn = tmp_path / "yn.json"
    yn.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"answer": {"enum": ["yes", "no"]}},
                "required": ["answer"],
                "additionalProperties": False,
            }
        )
    )
    out = tmp_path / "report.json"
    p = run_cli(
        "collapse",
        "--schema",
        "samples/conj.json",
        "--schema",
        str(yn),
        "--input",
        "-",
        "--seeds",
        "2",
        "--seed",
        "4",
        "--temperatures",
        "0.7,1.0",
        "--top-ps",
        "0.9,1.0",
        "--max-tokens",
        "12",
        "--out",
        str(out),
        "--no-progress",
        "--width",
        "80",
        input=json.dumps({"id": "q", "prompt": PROMPT}) + "\n",
    )
    rep = json.loads(out.read_text())
    gens, cells, paired = rep["generations"], rep["cells"], rep["paired"]
    incomplete = sum(not g["complete"] for g in gens)
    assert p.returncode == (1 if incomplete else 0), p.stderr
    assert ("did not complete" in p.stderr) == bool(incomplete)
    assert rep["v"] == 1
    assert rep["settings"]["seeds"] == [4, 5] and rep["settings"]["prompts"] == [PROMPT]
    assert rep["settings"]["reference"] == {"temperature": 0.7, "top_p": 0.9}

    schemas = ["samples/conj.json", str(yn)]
    assert len(gens) == 2 * 2 * 2
    for g in gens:
        assert KEYS["generation"] <= g.keys()
        assert g["n_free"] + g["n_forced"] == g["n_steps"] >= 1
    for s in schemas:  # shown and withheld back to back, on the same seeds
        assert [(g["condition"], g["seed"]) for g in gens if g["schema"] == s] == [
            ("shown", 4),
            ("withheld", 4),
            ("shown", 5),
            ("withheld", 5),
        ]

    assert len(cells) == 3 * 2 * 4  # (2 schemas + all) x conditions x grid
    for c in cells:
        assert set(c) == KEYS["cell"]
        mine = [g for g in gens if g["condition"] == c["condition"] and c["schema"] in ("all", g["schema"])]
        assert c["free_steps"] == sum(g["n_free"] for g in mine)
        assert _rate(c["pooled_rate"]) and _rate(c["per_generation"]["mean"]) and _rate(c["mean_Z"])
        assert c["pooled_rate"] == (c["collapsed"] / c["free_steps"] if c["free_steps"] else None)
        assert c["per_generation"]["n"] == sum(1 for g in mine if g["n_free"])
        if c["top_p"] == 1.0:
            assert c["collapsed"] == 0 and c["pearson_Z_collapsed"] is None
        if (c["temperature"], c["top_p"]) == (0.7, 0.9):
            assert c["collapsed"] == sum(g["collapsed"] for g in mine)
    assert [r["schema"] for r in paired] == [*schemas, "all"]
    for r in paired:
        assert KEYS["paired"] <= r.keys()
        assert r["n_pairs"] == (4 if r["schema"] == "all" else 2)
        assert _rate(r["collapse_shown"]) and _rate(r["collapse_withheld"])

    out_text = p.stdout
    assert "collapse rate, schema shown" in out_text and "collapse rate, schema withheld" in out_text
    assert "shown vs withheld" in out_text and "yn.json" in out_text
    assert max(len(line) for line in out_text.splitlines()) <= 80
    assert "\u2026" not in out_text  # nothing cut off at 80 columns


@pytest.mark.model
def test_out_dash_prints_the_report_alone(run_cli):
    p = run_cli(
        "collapse",
        "--choice",
        "yes",
        "--choice",
        "no",
        "Is the sky blue?",
        "--input",
        "-",
        "--seeds",
        "1",
        "--temperatures",
        "1.0",
        "--top-ps",
        "0.5,1.0",
        "--max-tokens",
        "4",
        "--out",
        "-",
        input="Is grass green?\n",
    )
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert [g["prompt"] for g in rep["generations"]] == ["Is the sky blue?", "Is grass green?"]
    assert {g["condition"] for g in rep["generations"]} == {"withheld"} and rep["paired"] == []
    assert rep["settings"]["reference"] == {"temperature": 0.7, "top_p": 0.9}  # outside the grid: still used


@pytest.mark.model
def test_an_explicit_condition_flag_runs_that_condition_only(run_cli):
    p = run_cli(
        "collapse",
        "--schema",
        "samples/conj.json",
        PROMPT,
        "--withhold-schema",
        "--seeds",
        "2",
        "--temperatures",
        "0.7",
        "--top-ps",
        "0.9",
        "--max-tokens",
        "3",
        "--out",
        "-",
    )
    assert p.returncode == 1, p.stderr  # 3 tokens cannot complete the schema
    rep = json.loads(p.stdout)
    assert [(g["condition"], g["seed"]) for g in rep["generations"]] == [("withheld", 0), ("withheld", 1)]
    assert rep["settings"]["conditions"] == ["withheld"] and rep["paired"] == []
    assert all(not g["complete"] and g["stop_reason"] == "max_tokens" for g in rep["generations"])
    assert "2 of 2 generations did not complete" in p.stderr


def test_plot_without_matplotlib_is_a_one_line_error(run_cli, tmp_path):
    fake = tmp_path / "fake" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    p = run_cli(
        "collapse",
        "--schema",
        "samples/conj.json",
        "x",
        "--plot",
        str(tmp_path / "figs"),
        env={"PYTHONPATH": str(fake.parent)},
    )
    assert_one_line_error(p, "--plot needs matplotlib")
    assert not (tmp_path / "figs").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--temperatures", "0.5,x"], "--temperatures"),
        (["--top-ps", "0.5,1.5"], "--top-ps"),
        (["--temperatures", "0.3,0.3"], "twice"),
        (["--seeds", "0"], "--seeds"),
        (["--seeds", "1,1"], "twice"),
        (["--seeds", "a"], "--seeds"),
        (["--schema", "samples/conj.json"], "twice"),
        (["--out", "/nonexistent-dir/r.json"], "/nonexistent-dir"),
    ],
)
def test_bad_flags_fail_before_the_run(run_cli, args, needle):
    p = run_cli("collapse", "--schema", "samples/conj.json", PROMPT, *args)
    assert_one_line_error(p, needle)


def test_needs_a_prompt_and_reports_bad_input_records(run_cli):
    assert_one_line_error(run_cli("collapse", "--schema", "samples/conj.json"), "PROMPT")
    bad = json.dumps({"id": 1, "prompt": 5}) + "\n"
    assert_one_line_error(
        run_cli("collapse", "--schema", "samples/conj.json", "--input", "-", input=bad), "<stdin>:1", "not a string"
    )


def _flags(schema):
    return ConstraintFlags(None, None, schema, None, None, None, "compact", False, False)


def test_several_schemas_load_each_and_one_schema_commands_refuse_them(tmp_path):
    conj = str(REPO / "samples" / "conj.json")
    other = tmp_path / "n.json"
    other.write_text('{"type": "integer"}')
    cs = _flags([conj, str(other)]).load_each()
    assert [c.source for c in cs] == [conj, str(other)] and cs[1].schema == {"type": "integer"}
    assert [c.source for c in _flags([conj]).load_each()] == [conj]
    assert _flags(conj).load().kind == "schema"
    with pytest.raises(UsageError, match="one --schema"):
        _flags([conj, str(other)]).load()
    with pytest.raises(UsageError, match="twice"):
        _flags([conj, conj]).load_each()


@pytest.mark.model
def test_plot_writes_the_figures(run_cli, tmp_path):
    figs = tmp_path / "figs"
    p = run_cli(
        "collapse",
        "--schema",
        "samples/conj.json",
        PROMPT,
        "--seeds",
        "1",
        "--temperatures",
        "0.7,1.0",
        "--top-ps",
        "0.9,1.0",
        "--out",
        str(tmp_path / "r.json"),
        "--plot",
        str(figs),
        "--no-progress",
    )
    assert p.returncode in (0, 1), p.stderr
    for name in ("collapse_grid.png", "paired_Z.png"):
        assert (figs / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
