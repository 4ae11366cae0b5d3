"""A tiny study file on the bundled model (two schemas, 2 seeds, a 2x2 grid): the laws
of the report, position tags on the real outputs against the independent replay, and
resuming (a study stopped part way, with a line cut off, continues without computing
anything twice and ends with the same report); the CLI, killed and resumed."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from json_replay import Replay  # tests/ is on sys.path (rootdir conftest)

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.markdown import StudyReport
from ministruct.diagnostics.collapse.runner import DATA, StudyRun, build_study
from ministruct.diagnostics.collapse.studyfile import load_study
from ministruct.errors import UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.job import GenerationJob

pytestmark = pytest.mark.model

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "study"

TINY = f"""
seeds = 2
max_tokens = 20
p_valid_particles = 8
[grid]
temperatures = [0.7, 1.0]
top_ps = [0.9, 1.0]
[[schemas]]
name = "integer"
file = "{SAMPLES / "integer.json"}"
prompts = ["How many legs does a spider have?"]
[[schemas]]
name = "enum"
file = "{SAMPLES / "tight_enum.json"}"
prompts = ["Is this review positive, negative or neutral? 'Great stuff.'"]
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    p = tmp_path_factory.mktemp("study") / "tiny.toml"
    p.write_text(TINY, encoding="utf-8")
    return str(p)


def run_into(
    model, study: str, folder: Path, *, resume: bool = False, stop_after: int | None = None, parallel: int | None = 1
):
    spec = load_study(study)
    runner = StudyRun(
        build_study(spec, model),
        str(folder),
        free_control=spec.free_control,
        resume=resume,
        parallel=parallel,
        p_valid_particles=spec.p_valid_particles,
    )
    seen = []

    def on_done(done: int, total: int) -> None:
        seen.append(done)
        if stop_after is not None and len(seen) > stop_after:
            raise KeyboardInterrupt

    result = runner.run(on_done)
    StudyReport(result, spec).write(str(folder))
    return result


@pytest.fixture(scope="module")
def whole(model, tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    return folder, run_into(model, tiny, folder)


@pytest.fixture(scope="module")
def batched(model, tiny, tmp_path_factory):
    """The same study decoded two at a time (blocks of 8 generations)."""
    folder = tmp_path_factory.mktemp("batched")
    return folder, run_into(model, tiny, folder, parallel=2)


@pytest.fixture(params=["one at a time", "batched"])
def either(request, whole, batched):
    return whole if request.param == "one at a time" else batched


def test_the_laws_of_the_report(either):
    _, result = either
    report = result.report
    assert len(report.generations) == 8 and len(result.free) == 4
    for c in report.cells():
        if c["top_p"] == 1.0:
            assert c["collapsed"] == 0 and c["pooled_rate"] in (0.0, None)
        if c["free_steps"]:
            assert c["pooled_rate"] == c["collapsed"] / c["free_steps"]
        g = c["per_generation"]
        if g["n"]:
            assert g["min"] <= g["mean"] <= g["max"]
    assert any(c["collapsed"] for c in report.cells())  # the laws are not met by emptiness


def test_positions_of_the_real_outputs_equal_the_replay(either):
    _, result = either
    checked = 0
    for g in result.report.generations:
        assert g.positions is not None and len(g.positions) == g.n_steps
        ours = [(ptr, part) for runs in g.positions for ptr, part, n in runs for _ in range(n)]
        if not g.complete:
            continue
        assert ours == Replay(g.output, set()).run(), g.output
        checked += 1
        # a complete output ends at end-of-generation, or without one when the grammar is
        # done or the budget (kept as gen keeps it) closed it at the last token
        assert g.positions[-1] == [("(end)", "end", 0)] or g.stop_reason in ("grammar_done", "max_tokens")
    assert checked >= 2
    assert any(g.spans(i) for g in result.report.generations for i in range(g.n_steps))


def test_order_of_operations_is_recorded_for_every_step(either):
    _, result = either
    for g in result.report.generations:
        assert g.order_empty.shape == g.order_tv.shape == (g.n_steps,)
        assert np.array_equal(np.isnan(g.order_tv), g.order_empty)
        tv = g.order_tv[~g.order_empty]
        assert ((tv >= 0) & (tv <= 1)).all()


def test_p_valid_shown_vs_withheld_is_gens_p_valid_at_the_models_own_distribution(model, tiny, whole):
    """One P(valid) run per schema, prompt and condition: the p_valid `gen --particles 8`
    reports at T=1 without truncation for the same prompt (schema shown or not); the enum
    enumerated exactly, and that sum agrees with scoring each member's tokens (and the end)
    one at a time with llama.cpp directly, within the rows' noise between batch shapes; the
    schema shown makes a valid output far more probable; the report's table says so."""
    folder, result = whole
    runs = {(r.schema, r.condition): r for r in result.p_valid}
    assert sorted(runs) == [("enum", "shown"), ("enum", "withheld"), ("integer", "shown"), ("integer", "withheld")]
    assert {r.method for r in result.p_valid} == {"exact", "smc"} and runs["enum", "shown"].method == "exact"
    spec = load_study(tiny)
    schemas = {s.name: s for s in spec.schemas}
    params = SamplingParams(temperature=1.0, top_p=1.0, particles=8, seed=0)
    for (name, cond), r in runs.items():
        c = Constraint.from_json_schema(schemas[name].schema)
        job = GenerationJob(model, c, params, max_tokens=20, show_schema=cond == "shown")
        rec = job.run(schemas[name].prompts[0])
        assert rec.particles["p_valid"] == pytest.approx(r.p_valid, rel=1e-9), (name, cond)
        assert rec.particles["particle_method"] == r.method and 0 < r.p_valid <= 1
        if name == "enum":  # the canonical tokenization of each member, then the end, scored directly
            eog = sorted(model.vocabulary.eog_ids)
            direct = 0.0
            for member in schemas[name].schema["properties"]["sentiment"]["enum"]:
                model.reset()
                model.eval(job.prompt_tokens(schemas[name].prompts[0]))
                lp = 0.0
                for t in [*model.tokenize_bytes(json.dumps({"sentiment": member}).encode()), None]:
                    row = model.logits().astype(np.float64)
                    logp = row - np.logaddexp.reduce(row)
                    lp += np.logaddexp.reduce(logp[eog]) if t is None else logp[t]
                    if t is not None:
                        model.eval([t])
                direct += math.exp(lp)
            model.reset()
            # the enumeration counts every tokenization; the canonical ones carry almost all of it
            assert direct * (1 - 1e-9) <= r.p_valid <= 1.1 * direct, (cond, r.p_valid, direct)
    rows = {row["schema"]: row for row in json.loads((folder / "report.json").read_text())["p_valid"]}
    for name in ("integer", "enum"):
        row = rows[name]
        assert row["p_valid_shown"] == runs[name, "shown"].p_valid
        assert row["p_valid_withheld"] == runs[name, "withheld"].p_valid
        assert row["ratio"] == pytest.approx(row["p_valid_shown"] / row["p_valid_withheld"])
        assert row["ratio"] > 100  # the schema in the prompt carries the format
    md = (folder / "report.md").read_text()
    assert "## P(valid), schema shown vs withheld" in md
    assert f"| enum | 1 | {runs['enum', 'shown'].p_valid:.3g} | {runs['enum', 'withheld'].p_valid:.3g} |" in md
    assert "8 particles (an enum enumerated exactly), T=1, no truncation" in md


def test_p_valid_runs_can_be_turned_off_and_their_count_is_checked(model, tiny):
    spec = load_study(tiny)
    study = build_study(spec, model)
    on = StudyRun(study, "unused", p_valid_particles=8)
    off = StudyRun(study, "unused", p_valid_particles=0)
    assert len(on.p_valid_units) == 4 and off.p_valid_units == [] and on.key != off.key
    with pytest.raises(UsageError, match="particles must be an integer in \\[1, 64\\]"):
        StudyRun(study, "unused", p_valid_particles=65)


def test_a_stopped_study_resumes_to_the_same_report(model, tiny, whole, tmp_path):
    folder, full = whole
    with pytest.raises(KeyboardInterrupt):
        run_into(model, tiny, tmp_path, stop_after=3)
    lines = (tmp_path / DATA).read_bytes().split(b"\n")
    assert len(lines) - 2 == 3  # the header, three generations, the empty end
    with open(tmp_path / DATA, "ab") as f:  # a line cut off by a kill
        f.write(b'{"type": "generation", "key": "0/0/1/sh')
    with pytest.raises(UsageError, match="--resume"):
        run_into(model, tiny, tmp_path)
    resumed = run_into(model, tiny, tmp_path, resume=True)
    assert resumed.ran == 16 - 3  # 8 generations, 4 of the free control, 4 P(valid) runs
    for name in ("report.md", "report.json"):
        assert (tmp_path / name).read_text() == (folder / name).read_text()
    again = run_into(model, tiny, tmp_path, resume=True)
    assert again.ran == 0


def test_a_batched_study_repeats_itself_and_resumes_to_the_same_report(model, tiny, batched, tmp_path):
    """Batched: the same N and seeds give the same data; a study stopped in its first block
    of 8 runs that block again whole (3 generations again, none written twice) and ends
    with the same report; a resume with another parallel is refused."""
    folder, full = batched
    header = json.loads((folder / DATA).read_text().splitlines()[0])
    assert header["parallel"] == 2
    again = run_into(model, tiny, tmp_path / "again", parallel=2)
    assert again.report.to_dict() == full.report.to_dict()
    assert [f.to_state() for f in again.free] == [f.to_state() for f in full.free]
    stopped = tmp_path / "stopped"
    with pytest.raises(KeyboardInterrupt):
        run_into(model, tiny, stopped, stop_after=3, parallel=2)
    with pytest.raises(UsageError, match="parallel=2, not 3"):
        run_into(model, tiny, stopped, resume=True, parallel=3)
    resumed = run_into(model, tiny, stopped, resume=True, parallel=None)  # the folder's parallel
    assert (resumed.ran, resumed.rerun) == (16, 3)
    lines = (stopped / DATA).read_text().splitlines()
    assert len(lines) == 1 + 16 and len({json.loads(x)["key"] for x in lines[1:]}) == 16
    for name in ("report.md", "report.json"):
        assert (stopped / name).read_text() == (folder / name).read_text()
    assert run_into(model, tiny, stopped, resume=True, parallel=None).ran == 0


def test_a_different_study_is_refused_in_the_folder(model, tiny, whole, tmp_path):
    folder, _ = whole
    other = tmp_path / "other.toml"
    other.write_text(TINY.replace("seeds = 2", "seeds = 3"), encoding="utf-8")
    with pytest.raises(UsageError, match="different study"):
        run_into(model, str(other), folder, resume=True)


@pytest.mark.parametrize("parallel", [1, 2])
def test_the_cli_killed_and_resumed_writes_the_same_report(tiny, whole, batched, tmp_path, parallel):
    """Killed after three generations, resumed (with the folder's --parallel): the report
    of the uninterrupted library run with the same parallel."""
    folder, _ = whole if parallel == 1 else batched
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "ministruct", "collapse", "--study", tiny, "--report", str(out)]
    proc = subprocess.Popen([*cmd, "--parallel", str(parallel)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    data = out / DATA
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if data.exists() and data.read_bytes().count(b"\n") >= 4:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    else:  # finished before the kill (a fast machine): leave what a kill after line 4 leaves
        assert proc.returncode in (0, 1), proc.stderr.read().decode()
        data.write_bytes(b"".join(data.read_bytes().splitlines(keepends=True)[:4]))
        for f in out.iterdir():
            if f != data:
                shutil.rmtree(f) if f.is_dir() else f.unlink()
    assert not (out / "report.md").exists()
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 2 and "--resume" in again.stderr
    done = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr  # 1: a generation cut off by max_tokens
    assert (out / "report.md").read_text() == (folder / "report.md").read_text()
    assert json.loads((out / "report.json").read_text()) == json.loads((folder / "report.json").read_text())
