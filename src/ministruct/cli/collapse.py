"""`ministruct collapse`: the collapse study (diagnostics.md); Rich summary on stdout, `--out` JSON."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ministruct.cli.base import app, warn
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags
from ministruct.cli.options import NoProgress, RunFlags, run_flags
from ministruct.cli.progress import Progress
from ministruct.cli.think_options import ThinkFlags, think_flags
from ministruct.decode.defaults import DEFAULT_PARALLEL
from ministruct.diagnostics.collapse.defaults import BLOCK_PER_SLOT, CONDITIONS, DEFAULT_TEMPERATURES, DEFAULT_TOP_PS
from ministruct.errors import InputError, UsageError
from ministruct.jobs.records import open_lines, read_records


def _csv(values) -> str:
    return ",".join(str(v) for v in values)


@app.command()
@constraint_flags(several_schemas=True)
@run_flags(max_tokens=128)
@think_flags
def collapse(
    ctx: typer.Context,
    prompt: Annotated[Optional[str], typer.Argument(help="A prompt (and/or --input).")] = None,
    *,
    constraint: ConstraintFlags,
    run: RunFlags,
    think: ThinkFlags,
    input: Annotated[
        Optional[str],
        typer.Option("--input", help="More prompts: JSONL records with 'prompt', or plain lines; '-' for stdin."),
    ] = None,
    seeds: Annotated[
        str, typer.Option("--seeds", help="A count N (seeds --seed .. --seed+N-1) or a comma-separated list.")
    ] = "4",
    temperatures: Annotated[str, typer.Option("--temperatures", help="Grid temperatures, comma-separated.")] = _csv(
        DEFAULT_TEMPERATURES
    ),
    top_ps: Annotated[str, typer.Option("--top-ps", help="Grid top_p values, comma-separated.")] = _csv(DEFAULT_TOP_PS),
    out: Annotated[
        Optional[str],
        typer.Option("--out", help="Write the report JSON to this file ('-': stdout, instead of the summary)."),
    ] = None,
    plot: Annotated[
        Optional[str], typer.Option("--plot", help="Write figures (PNG) to this folder (needs matplotlib).")
    ] = None,
    width: Annotated[
        Optional[int], typer.Option("--width", min=40, help="Output width (default: the terminal, or $COLUMNS).")
    ] = None,
    study: Annotated[
        Optional[str],
        typer.Option("--study", help="Run a study file (TOML; see samples/study/study.toml) into --report DIR."),
    ] = None,
    report_dir: Annotated[
        Optional[str],
        typer.Option("--report", metavar="DIR", help="With --study: write report.md, report.json and figures here."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="With --study: continue the study --report DIR holds.")
    ] = False,
    parallel: Annotated[
        Optional[int],
        typer.Option(
            "--parallel",
            min=1,
            help=(
                f"Decode up to N generations at once, one model step for all of them (default {DEFAULT_PARALLEL}; "
                "with --resume, the folder's). Rows computed in a batch differ in the last bits from rows "
                "computed alone, so a draw can differ from --parallel 1; the same N and seeds give the same "
                f"report. A --study runs in blocks of {BLOCK_PER_SLOT}N generations: --resume runs again the "
                "block a kill cut off."
            ),
        ),
    ] = None,
    no_progress: NoProgress = False,
) -> None:
    """The collapse study: sample each generation once at --temperature/--top-p (the
    reference setting), with the schema shown and withheld over the same seeds, and
    re-evaluate every step's logits over the temperature x top_p grid. With --study FILE
    --report DIR: a whole study file (its schemas, prompts, grid, seeds, conditions),
    with --seeds and --model overriding the file's."""
    from ministruct.decode.model import Model  # the study's library loads when it runs, not for --help
    from ministruct.diagnostics.collapse.grid import Grid, StudySettings
    from ministruct.diagnostics.collapse.study import CollapseStudy

    if study is not None or report_dir is not None or resume:
        _study(ctx, study, report_dir, resume, prompt, input, constraint, run, seeds, no_progress, parallel)
        return
    grid = Grid(_floats(temperatures, "--temperatures"), _floats(top_ps, "--top-ps"))
    settings = StudySettings(
        seeds=_seeds(seeds, run.params.seed),
        grid=grid,
        params=run.params,
        conditions=_conditions(ctx, run),
        max_tokens=run.max_tokens,
        chat=run.chat,
        system=run.system,
    )
    constraint.refuse_stdin_twice(input)
    prompts = _prompts(prompt, input)
    constraint = constraint.with_model(run.model)
    constraints = constraint.load_each()
    for c in constraints:
        for w in c.warnings:
            warn(w if w.startswith(c.source) else f"{c.source}: {w}")  # (front ends place most of theirs)
    if plot is not None:
        from ministruct.diagnostics.collapse.render import require_matplotlib

        require_matplotlib()
    if out not in (None, "-"):
        _check_writable(out)

    llm = constraint.apply_template(Model.load(run.model, **run.load_options()))
    arm = think.settings(llm)  # the think arm: every condition again, thinking first, on the same seeds
    if arm is not None and arm.think_tokens is None:
        arm = arm.with_tokens(run.max_tokens // 2)  # the study cuts plainly: leave room for the answer
    study = CollapseStudy(llm, constraints, prompts, settings, think=arm)
    for note in study.notes:
        warn(note)
    with Progress(
        enabled=not no_progress, total=study.n_generations, label="collapse study", unit="generations"
    ) as progress:
        report = study.run(
            on_generation=lambda _: progress.advance(), parallel=DEFAULT_PARALLEL if parallel is None else parallel
        )

    if out == "-":
        sys.stdout.write(report.dumps())
    else:
        if out is not None:
            report.write(out)
        from rich.console import Console

        from ministruct.diagnostics.collapse.render import collapse_summary

        (Console(width=width) if width else Console()).print(collapse_summary(report))
    if plot is not None:
        from ministruct.diagnostics.collapse.render import write_figures

        for path in write_figures(report, plot):
            print(f"ministruct: wrote {path}", file=sys.stderr)
    if report.incomplete:
        warn(
            f"{report.incomplete} of {len(report.generations)} generations did not complete "
            f"(cut off by --max-tokens {run.max_tokens} or no legal continuation); their steps are counted"
        )
        raise typer.Exit(1)


def _study(
    ctx: typer.Context,
    study: str | None,
    report_dir: str | None,
    resume: bool,
    prompt: str | None,
    input: str | None,
    constraint: ConstraintFlags,
    run: RunFlags,
    seeds: str,
    no_progress: bool,
    parallel: int | None,
) -> None:
    """`--study FILE --report DIR [--resume]`."""
    from ministruct.decode.model import Model
    from ministruct.diagnostics.collapse.markdown import StudyReport
    from ministruct.diagnostics.collapse.render import require_matplotlib
    from ministruct.diagnostics.collapse.runner import StudyRun, build_study
    from ministruct.diagnostics.collapse.studyfile import load_study
    from ministruct.grammar.schema.options import DEFAULT_WHITESPACE, SchemaOptions

    if study is None or report_dir is None:
        raise UsageError("--study FILE and --report DIR go together (--resume continues a --report DIR)")
    if prompt is not None or input is not None:
        raise UsageError("--study names its prompts: drop the PROMPT argument and --input")
    if constraint.schema or constraint.grammar or constraint.regex or constraint.choice or constraint.lark:
        raise UsageError("--study names its schemas: drop --schema/--grammar/--regex/--choice")
    require_matplotlib("--study")
    spec = load_study(study)
    explicit = ctx.get_parameter_source("seeds")
    override = None if explicit is None or explicit.name == "DEFAULT" else _seeds(seeds, run.params.seed)
    options = SchemaOptions(
        whitespace=constraint.whitespace or DEFAULT_WHITESPACE,
        lenient=constraint.lenient,
        oneof_as_anyof=constraint.oneof_as_anyof,
        extra_properties=constraint.extra_properties or "explicit",
    )
    model = Model.load(run.model or spec.model, **run.load_options())
    cs = build_study(spec, model, options=options, seeds=override, base=run.params)
    runner = StudyRun(
        cs,
        report_dir,
        free_control=spec.free_control,
        resume=resume,
        parallel=parallel,
        p_valid_particles=spec.p_valid_particles,
    )
    total = len(runner.units) + len(runner.free_units)
    with Progress(
        enabled=not no_progress, total=total, label="collapse study", plain_every=30.0, unit="generations"
    ) as progress:
        seen = [None]

        def on_done(done: int, _total: int) -> None:
            if seen[0] is None:
                progress.start_at(done)
            else:
                progress.advance(done - seen[0])
            seen[0] = done

        result = runner.run(on_done)
    for path in StudyReport(result, spec).write(report_dir):
        print(f"ministruct: wrote {path}", file=sys.stderr)
    if result.report.incomplete:
        warn(
            f"{result.report.incomplete} of {len(result.report.generations)} generations did not complete "
            f"(cut off by max_tokens {spec.max_tokens} or no legal continuation); their steps are counted"
        )
        raise typer.Exit(1)


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag} takes comma-separated numbers, got {text!r}") from None


def _seeds(text: str, first: int) -> tuple[int, ...]:
    """`--seeds N` (N seeds from --seed on) or `--seeds a,b,c`."""
    try:
        if "," not in text:
            n = int(text)
            if n < 1:
                raise UsageError(f"--seeds: the count must be >= 1, got {n}")
            return tuple(range(first, first + n))
        seeds = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--seeds takes a count or comma-separated integers, got {text!r}") from None
    if any(s < 0 for s in seeds):
        raise UsageError(f"--seeds: seeds must be >= 0, got {text!r}")
    return seeds


def _conditions(ctx: typer.Context, run: RunFlags) -> tuple[str, ...]:
    """Both conditions, unless --show-schema or --withhold-schema is given explicitly."""
    source = ctx.get_parameter_source("show_schema")
    if source is None or source.name == "DEFAULT":
        return CONDITIONS
    return ("shown",) if run.show_schema else ("withheld",)


def _prompts(prompt: str | None, input: str | None) -> list[str]:
    """The PROMPT argument, then every --input record; a bad record is an error."""
    if prompt is None and input is None:
        raise UsageError("give a PROMPT argument and/or --input FILE")
    prompts = [] if prompt is None else [prompt]
    if input is not None:
        with open_lines(input) as (lines, source):
            for rec in read_records(lines, "prompt", source):
                if rec.error is not None:
                    raise InputError(rec.error)
                prompts.append(rec.value)
        if len(prompts) == (prompt is not None):
            raise InputError(f"{source}: no prompts")
    return prompts


def _check_writable(path: str) -> None:
    """Fail before a long run when the report could not be written."""
    parent = Path(path).parent
    if Path(path).is_dir():
        raise InputError(f"{path}: is a directory, not a report file")
    if not parent.is_dir():
        raise InputError(f"{path}: no such folder {str(parent)!r} for the report")
    if not os.access(parent, os.W_OK):
        raise InputError(f"{path}: cannot write the report (folder not writable)")
