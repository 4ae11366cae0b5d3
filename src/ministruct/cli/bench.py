"""`ministruct bench`: mask time per step, compile time, decode speed with and without the constraint.

Decode speed is output tokens per second three ways: unconstrained, constrained token by
token (`constrained`), and constrained with fast-forward (`fast_forward`: stretches the
grammar dictates evaluated in one batch, without the dictated tokens' logits rows, as
`gen` runs it when nothing reads them); `ff_share` is the share of the fast-forward run's
output tokens that were fast-forwarded.

The mask walk runs on a cold compile by default (`--cold`): the grammar's masks are
neither restored from nor saved to the disk cache, so every first visit of a parser
configuration is timed, as a first generation would pay it. `--warm` restores what an
earlier run saved (and saves what this run learns). The vocabulary's token trie is
prepared before the clock starts (a once-per-model cost, like a tokenizer).

`warm_mask_us` is the warm process: after the walk above, the grammar compiled afresh
and walked at the next seed (`--seed` + 1), an output this process has not walked, never
a replay of the first walk (which would meet only configurations it already made).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ministruct.cli.base import app, warn
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags
from ministruct.cli.options import RunFlags, run_flags

if TYPE_CHECKING:
    from ministruct.jobs.job import GenerationJob

DEFAULT_PROMPT = "Write a short answer."
FIRST_STEPS = 10


@app.command()
@constraint_flags
@run_flags(max_tokens=64)
def bench(
    *,
    constraint: ConstraintFlags,
    run: RunFlags,
    prompt: Annotated[str, typer.Option("--prompt", help="Prompt for the tokens/s measurement.")] = DEFAULT_PROMPT,
    steps: Annotated[
        int, typer.Option("--steps", min=1, help="Random-walk steps (random legal tokens, seeded by --seed).")
    ] = 200,
    no_generate: Annotated[
        bool, typer.Option("--no-generate", help="Measure masks only (loads the vocabulary, not the weights).")
    ] = False,
    cold: Annotated[
        bool,
        typer.Option("--cold/--warm", help="Cold: ignore the disk cache of masks (default). Warm: use and fill it."),
    ] = True,
    rounds: Annotated[
        int, typer.Option("--rounds", min=1, help="Generations per condition; the median rate is reported.")
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")] = False,
) -> None:
    """Time masks along a seeded random walk, compile time, and tokens/s constrained vs unconstrained."""
    from ministruct.decode.loop import Decoder  # the library loads when the command runs, not for --help
    from ministruct.decode.model import Model
    from ministruct.diagnostics.bench import first_token_ms, peak_rss_mb, prepare_vocabulary, random_walk, warm_walk
    from ministruct.engine.compile import compile_grammar
    from ministruct.engine.matcher import Matcher
    from ministruct.grammar.constraint import import_front_end

    # the front end's modules are imported before the clock: process start-up, as the
    # peers' `import` is in benchmarks/ (reported apart as import_ms)
    t0 = time.perf_counter()
    if constraint.kind is not None:
        import_front_end(constraint.kind)
    import_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    c = constraint.load()
    parse_ms = (time.perf_counter() - t0) * 1000
    for w in c.warnings:
        warn(w)
    llm = constraint.apply_template(Model.load(run.model, vocab_only=no_generate, **run.load_options()))
    vocab = llm.vocabulary
    setup = prepare_vocabulary(vocab)
    t1 = time.perf_counter()
    compiled = compile_grammar(c.grammar, vocab, use_cache=not cold)
    compile_ms = parse_ms + (time.perf_counter() - t1) * 1000
    walk = random_walk(compiled, steps, seed=run.params.seed)
    if not cold:
        compiled.persist()
    again = warm_walk(c.grammar, vocab, steps, after_seed=run.params.seed, use_cache=not cold)
    rates: dict[str, float] | None = None
    ff_share: float | None = None
    ttft_ms: float | None = None
    if not no_generate:
        job = run.job(llm, c)
        ttft_ms = first_token_ms(Decoder(job.model, job.prompt_tokens(prompt), Matcher(compiled), job.params))
        rates, ff_share = _rates(job, prompt, rounds, cold)
    report = {
        "v": 1,
        "model": str(llm.path),
        "n_vocab": vocab.n_logits,
        "constraint": c.describe(),
        "steps": walk.steps,
        "compile_ms": round(compile_ms, 3),
        "mask_us": walk.stats().to_dict(),
        "tokens_per_s": rates,
        "ff_share": ff_share,
        "first_mask_ms": round(compile_ms + walk.first_mask_us / 1000, 3),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "vocab_ms": round(setup.vocab_s * 1000, 3),
        "kernel_ms": round(setup.kernel_s * 1000, 3),
        "import_ms": round(import_ms, 3),
        "cold_mask_us": walk.stats().to_dict(),
        "first_steps_us": [round(x, 2) for x in walk.mask_us[:FIRST_STEPS]],
        "warm_mask_us": again.stats().to_dict(),
        "ttft_ms": None if ttft_ms is None else round(ttft_ms, 3),
    }
    llm.close()
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
    else:
        _table(report, resets=walk.resets, cold=cold)


def _rates(job: GenerationJob, prompt: str, rounds: int, cold: bool) -> tuple[dict[str, float], float | None]:
    """(median output tokens/s over `rounds` generations each way, alternating, after a
    short warm-up that also caches the prompt's prefill; the share of fast-forwarded
    tokens over every fast-forward round)."""
    from ministruct.decode.loop import Decoder
    from ministruct.diagnostics.bench import output_rate
    from ministruct.engine.compile import compile_grammar
    from ministruct.engine.matcher import Matcher

    ids = job.prompt_tokens(prompt)
    Decoder(job.model, ids, None, job.params, max_tokens=2).run()  # warm the model up
    rates: dict[str, list[float]] = {"constrained": [], "fast_forward": [], "unconstrained": []}
    n_ff = n_out = 0
    for _ in range(rounds):
        free = Decoder(job.model, ids, None, job.params, max_tokens=job.max_tokens)
        rates["unconstrained"].append(output_rate(free)[0])
        for name, ff in (("constrained", False), ("fast_forward", True)):
            compiled = compile_grammar(job.constraint.grammar, job.model.vocabulary, use_cache=not cold)
            dec = Decoder(
                job.model,
                ids,
                Matcher(compiled),
                job.params,
                max_tokens=job.max_tokens,
                fast_forward=ff,
                forced_logits=False,
            )
            rates[name].append(output_rate(dec)[0])
            if ff:
                n_ff += dec.result.n_fast_forward
                n_out += dec.result.n_tokens
            if not cold:
                compiled.persist()
    share = round(n_ff / n_out, 4) if n_out else None
    return {name: round(_median(xs), 2) for name, xs in rates.items()}, share


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    k = len(s) // 2
    return s[k] if len(s) % 2 else (s[k - 1] + s[k]) / 2


def _stats(m: dict[str, float]) -> str:
    return f"mean {m['mean']:.1f} us  p50 {m['p50']:.1f}  p99 {m['p99']:.1f}  max {m['max']:.1f}"


def _table(r: dict[str, Any], *, resets: int, cold: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from ministruct.engine import kernel

    t = Table(title="ministruct bench", show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value")
    con = r["constraint"]
    t.add_row("model", f"{Path(r['model']).name} ({r['n_vocab']:,} tokens)")
    t.add_row("constraint", f"{con['kind']} {con['source'] if con['kind'] == 'grammar' else con['text'][:60]}")
    t.add_row("compile", f"{r['compile_ms']:.1f} ms ({'cold' if cold else 'warm'} cache)")
    t.add_row(f"mask, {r['steps']} steps ({resets} restarts)", _stats(r["mask_us"]))
    t.add_row("warm process, next seed", _stats(r["warm_mask_us"]))
    t.add_row("first mask ready", f"{r['first_mask_ms']:.1f} ms")
    t.add_row("vocabulary, compiled walk", f"{r['vocab_ms']:.1f} ms, {r['kernel_ms']:.1f} ms (before the clock)")
    if r["ttft_ms"] is not None:
        t.add_row("first token", f"{r['ttft_ms']:.1f} ms (prefill, first mask, first draw)")
    t.add_row("trie walk", "compiled (numba)" if kernel.available() else f"numpy ({kernel.failure()})")
    tps = r["tokens_per_s"]
    if tps is None:
        t.add_row("tokens/s", "not measured (--no-generate)")
    else:
        u, cst, fwd = tps["unconstrained"], tps["constrained"], tps["fast_forward"]
        change = f" ({(cst / u - 1) * 100:+.1f}%)" if u else ""
        t.add_row("tokens/s", f"constrained {cst:.1f}, unconstrained {u:.1f}{change}")
        share = "n/a" if r["ff_share"] is None else f"{r['ff_share']:.0%} of the tokens fast-forwarded"
        fchange = f" ({(fwd / u - 1) * 100:+.1f}% vs unconstrained)" if u else ""
        t.add_row("fast-forward", f"{fwd:.1f} tokens/s{fchange}; {share}")
    t.add_row("peak RSS", f"{r['peak_rss_mb']:.0f} MiB")
    Console().print(t)
