"""Particles (issue 47): how far masked sampling and `--particles` land from the exact conditional.

For three finite constraints (a choice, an enum schema, a bounded regex) the exact
conditional of the base sampler (temperature 1, no truncation) is computed by scoring
the language's outputs under the model (exact.enumerate_language, with a tolerance of 1e-6
of the mass found). Then, with `--draws` seeds each:

  masked        today's sampler (mask first, renormalized each step)
  smc N         N particles proper (the enumeration turned off), N in --particles
  gen N         what `gen --particles N` does here: the language is small, so exact draws

and, for each, the total-variation distance between its draws and the exact conditional,
beside `noise`: the mean distance of as many draws from the exact conditional itself
(what a perfect sampler scores with that many draws). Time: wall seconds per draw in one
process (the model loaded once, the prompt's KV cache reused), and the ratio to
`smc 1` (one particle: today's draws, weighed) in the same run. The machine is shared:
the load average is printed with each table.

    .venv/bin/python benchmarks/particles.py [--models smollm2,gemma3] [--draws 400] [--smc-draws N]
                                             [--particles 4,16,64] [--cases choice,enum,regex] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from model_files import model_path  # noqa: E402  (beside this file)

from ministruct.decode.exact import enumerate_language  # noqa: E402
from ministruct.decode.model import Model  # noqa: E402
from ministruct.decode.particles import ParticleContexts, ParticleDecoder, PrefixRows  # noqa: E402
from ministruct.decode.sampling import SamplingParams  # noqa: E402
from ministruct.grammar.constraint import Constraint  # noqa: E402
from ministruct.jobs.job import GenerationJob  # noqa: E402

CASES = [
    ("choice", "Which is a fruit?", lambda: Constraint.from_choices(["The potato", "An apple", "banana"])),
    (
        "enum",
        "What colour is grass?",
        lambda: Constraint.from_json_schema({"enum": ["green", "red", "blue", "The colour of sand"]}),
    ),
    ("regex", "Pick a number between 10 and 99.", lambda: Constraint.from_regex("[0-9]{2}")),
]
MAX_TOKENS = 16


def tv(p: dict, q: dict) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def empirical(outputs: list[bytes]) -> dict[bytes, float]:
    return {k: v / len(outputs) for k, v in Counter(outputs).items()}


def noise(reference: dict[bytes, float], draws: int, reps: int = 50) -> float:
    """The mean TV of `draws` draws from the reference itself."""
    rng = np.random.default_rng(0)
    keys = list(reference)
    p = np.array([reference[k] for k in keys])
    p = p / p.sum()
    out = []
    for _ in range(reps):
        counts = rng.multinomial(draws, p)
        out.append(0.5 * float(np.abs(counts / draws - p).sum()))
    return float(np.mean(out))


def reference_of(job: GenerationJob, prompt: str, contexts: ParticleContexts):
    dec = job.decoder(prompt)
    dec.start()
    rows = PrefixRows(contexts.get(job.model, 1, len(dec.prompt_tokens) + MAX_TOKENS + 1), dec.prompt_tokens)
    enum = enumerate_language(
        rows,
        dec.prompt_tokens,
        dec.matcher.fork(),
        dec.params,
        sorted(job.model.vocabulary.eog_ids),
        max_tokens=MAX_TOKENS,
        max_nodes=20000,
        tolerance=1e-6,
    )
    assert enum is not None
    return enum


def draw_all(job: GenerationJob, prompt: str, draws: int, particles: int | None, exact: bool, contexts) -> tuple:
    """(outputs, seconds per draw, mean p_valid) over seeds 0..draws-1."""
    from dataclasses import replace

    outputs, p_valid = [], []
    cache: dict = {}
    t0 = time.perf_counter()
    for seed in range(draws):
        if particles is None:
            dec = job.decoder(prompt, seed=seed)
        else:
            params = replace(job.params, seed=seed, particles=particles)
            plain = job.decoder(prompt, seed=seed)
            dec = ParticleDecoder(
                job.model,
                plain.prompt_tokens,
                plain.matcher,
                params,
                max_tokens=MAX_TOKENS,
                contexts=contexts,
                exact_cache=cache,
                exact=exact,
            )
            dec.forced_logits = False
        gen = dec.run()
        assert gen.complete, (gen.output, gen.stop_reason)
        outputs.append(gen.output)
        if gen.particles is not None:
            p_valid.append(gen.particles.p_valid)
    dt = (time.perf_counter() - t0) / draws
    return outputs, dt, (float(np.mean(p_valid)) if p_valid else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--smc-draws", type=int, default=None, help="draws for the smc N rows (default --draws)")
    ap.add_argument("--particles", default="4,16,64")
    ap.add_argument("--cases", default=",".join(c[0] for c in CASES))
    ap.add_argument("--samplers", default="masked,smc,gen", help="which rows: masked (and smc 1), smc N, gen N")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ns = [int(x) for x in args.particles.split(",")]
    rows: list[dict] = []
    for name in args.models.split(","):
        model = Model.load(model_path(name), n_ctx=2048, seed=0)
        contexts = ParticleContexts()
        for case, prompt, make in CASES:
            if case not in args.cases.split(","):
                continue
            job = GenerationJob(model, make(), SamplingParams(temperature=1.0, top_p=1.0), max_tokens=MAX_TOKENS)
            t0 = time.perf_counter()
            enum = reference_of(job, prompt, contexts)
            ref = enum.distribution(model.vocabulary)
            top = sorted(ref, key=lambda k: -ref[k])[:3]
            print(
                f"\n{name} {case}: {prompt!r}  P(valid) {enum.p_valid:.3g}  reference: {enum.nodes} prefixes scored "
                f"in {time.perf_counter() - t0:.1f}s, mass left out <= {enum.left_out / enum.p_valid:.1e} of it; "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
            print("  top of the exact conditional: " + ", ".join(f"{k.decode()!r} {ref[k]:.3f}" for k in top))
            print(f"  noise ({args.draws} draws of the exact conditional itself): TV {noise(ref, args.draws):.3f}")
            if args.smc_draws and args.smc_draws != args.draws:
                print(f"  noise ({args.smc_draws} draws, the smc N rows): TV {noise(ref, args.smc_draws):.3f}")
            print(
                f"  {'sampler':<10} {'draws':>5} {'TV':>6} {'s/draw':>8} {'x smc 1':>8} {'p_valid':>10}  top outputs",
                flush=True,
            )
            which = args.samplers.split(",")
            methods = [("masked", None, False), ("smc 1", 1, False)] if "masked" in which else []
            methods += [(f"smc {n}", n, False) for n in ns] if "smc" in which else []
            methods += [(f"gen {n}", n, True) for n in ns if n == 16] if "gen" in which else []
            base_dt = None
            for label, n, exact in methods:
                k = args.draws if exact or n in (None, 1) else (args.smc_draws or args.draws)
                outs, dt, pv = draw_all(job, prompt, k, n, exact, contexts)
                if label == "smc 1":
                    base_dt = dt
                emp = empirical(outs)
                d = tv(emp, ref)
                ratio = f"{dt / base_dt:.2f}" if base_dt else "-"
                common = ", ".join(f"{k.decode()!r} {v:.2f}" for k, v in sorted(emp.items(), key=lambda kv: -kv[1])[:3])
                pvs = f"{pv:.3g}" if pv is not None else "-"
                print(f"  {label:<10} {k:5d} {d:6.3f} {dt:8.3f} {ratio:>8} {pvs:>10}  {common}", flush=True)
                rows.append(
                    dict(
                        model=name,
                        case=case,
                        sampler=label,
                        tv=d,
                        s_per_draw=dt,
                        p_valid=pv,
                        p_valid_exact=enum.p_valid,
                    )
                )
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=1))
        contexts.close()
        model.close()


if __name__ == "__main__":
    main()
