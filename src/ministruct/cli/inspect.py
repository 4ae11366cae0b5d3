"""`ministruct inspect [PROMPT]`: what a constraint is, or how it shaped one generation.

Without a prompt: the grammar (canonical GBNF, sizes, warnings), the legal-set sizes
over configurations reached by seeded random walks on the model's vocabulary (loaded
vocab-only), sample strings, and tokenizer diagnostics. With a prompt: one generation
rendered as a per-token table plus a summary (compact below 100 columns; to a pipe, with
neither --width nor $COLUMNS, the table alone as TSV). `--json` prints one object instead.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer

from ministruct.cli.base import app
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags
from ministruct.cli.options import NoProgress, RunFlags, run_flags
from ministruct.cli.progress import Progress
from ministruct.cli.think_options import ThinkFlags, think_flags
from ministruct.jobs.records import RECORD_VERSION


@app.command()
@constraint_flags
@run_flags(max_tokens=64)
@think_flags
def inspect(
    prompt: Annotated[
        Optional[str], typer.Argument(help="Run one generation and show every token (omit for the grammar report).")
    ] = None,
    *,
    constraint: ConstraintFlags,
    run: RunFlags,
    think: ThinkFlags,
    walks: Annotated[
        int, typer.Option("--walks", min=0, help="Random walks for legal-set sizes and samples (no PROMPT).")
    ] = 5,
    walk_steps: Annotated[int, typer.Option("--walk-steps", min=1, help="Tokens per random walk at most.")] = 32,
    width: Annotated[
        Optional[int], typer.Option("--width", min=40, help="Output width (default: the terminal, or $COLUMNS).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    no_progress: NoProgress = False,
) -> None:
    """Show what the constraint is, or how it shaped one generation token by token."""
    from rich.console import Console  # the library loads when the command runs, not for --help

    constraint = constraint.with_model(run.model)
    c = constraint.load()
    console = Console(width=width) if width else Console()
    if prompt is None:
        _grammar_report(
            c, run.model, run.params.seed, walks, walk_steps, console, as_json, no_progress, think, constraint
        )
        return
    status = _generation_report(
        c,
        run.model,
        run.params,
        prompt,
        max_tokens=run.max_tokens,
        chat=run.chat,
        system=run.system,
        show_schema=run.show_schema,
        load_options=run.load_options(),
        console=console,
        as_json=as_json,
        no_progress=no_progress,
        think=think,
        flags=constraint,
        tsv=width is None and not os.environ.get("COLUMNS") and not sys.stdout.isatty(),
    )
    raise typer.Exit(status)


def _grammar_report(c, model, seed, walks, walk_steps, console, as_json, no_progress, think, flags) -> None:
    from ministruct.decode.model import Model
    from ministruct.diagnostics.grammar_info import grammar_info
    from ministruct.diagnostics.render import grammar_report, tokenizer_panel
    from ministruct.diagnostics.tokenizer import tokenizer_report
    from ministruct.engine.compile import compile_grammar
    from ministruct.jobs.think import think_constraint

    llm = flags.apply_template(Model.load(model, vocab_only=True))
    vocab = llm.vocabulary
    settings = think.settings(llm)
    if settings is not None:
        c = think_constraint(c, settings, vocab)
    compiled = compile_grammar(c.grammar, vocab)
    with Progress(enabled=not no_progress, total=walks, label="walking the grammar", unit="walks") as progress:
        info = grammar_info(
            compiled,
            c.describe(),
            warnings=c.warnings,
            walks=walks,
            max_steps=walk_steps,
            seed=seed,
            on_walk=lambda _: progress.advance(),
        )
    compiled.persist()
    tok = tokenizer_report(vocab)
    if as_json:
        _print_json({"grammar": info.to_dict(), "tokenizer": tok.to_dict()})
        return
    console.print(grammar_report(info))
    console.print(tokenizer_panel(tok))


def _generation_report(
    c,
    model,
    params,
    prompt,
    *,
    max_tokens,
    chat,
    system,
    show_schema,
    load_options,
    console,
    as_json,
    no_progress,
    think,
    flags,
    tsv=False,
) -> int:
    from ministruct.decode.model import Model
    from ministruct.diagnostics.render import step_table, step_tsv, summary_panel, tool_scores_table
    from ministruct.diagnostics.tokenizer import round_trip
    from ministruct.diagnostics.trace import TraceWriter
    from ministruct.jobs.job import GenerationJob

    llm = flags.apply_template(Model.load(model, **load_options))
    job = GenerationJob(
        llm,
        c,
        params,
        max_tokens=max_tokens,
        chat=chat,
        system=system,
        show_schema=show_schema,
        think=think.settings(llm),
    )
    tracer = TraceWriter(None, job)
    with Progress(enabled=not no_progress, total=max_tokens, label="generating", unit="tokens") as progress:
        result = tracer.run(prompt, rid=1, seed=params.seed, on_record=lambda _: progress.advance())
    job.persist()
    gen = result.generation
    rt = round_trip(llm.vocabulary, gen.tokens if gen else [], lambda s: llm.tokenize(s, add_bos=False, special=False))
    summary = tracer.summary
    assert summary is not None
    status = 0 if result.complete else 1
    if as_json:
        _print_json(
            {
                "header": tracer.header,
                "steps": [r.to_record() for r in tracer.records],
                "summary": summary.to_record(),
                "result": result.to_record(),
                "round_trip": rt.to_dict(),
            }
        )
        return status
    if tsv:
        sys.stdout.write(step_tsv(tracer.records))
        return status
    console.print(step_table(tracer.records, title=f"{len(tracer.records)} tokens, {llm.name}", width=console.width))
    if result.tool_scores:
        console.print(tool_scores_table(result.tool_scores))
    notes = [n for n in (rt.note(),) if n]
    console.print(
        summary_panel(
            summary,
            output=result.output,
            stop_reason=result.stop_reason,
            complete=result.complete,
            notes=notes + _think_notes(result),
        )
    )
    return status


def _think_notes(result) -> list[str]:
    if result.reasoning is None:
        return []
    ended = {"closed": "the model closed it", "budget": "the budget closed it", None: "it never ended"}
    return [f"thinking: {result.think_tokens} tokens, {ended[result.think_end]}: {result.reasoning!r}"]


def _print_json(obj: dict) -> None:
    sys.stdout.write(json.dumps({"v": RECORD_VERSION, **obj}, ensure_ascii=False) + "\n")
    sys.stdout.flush()
