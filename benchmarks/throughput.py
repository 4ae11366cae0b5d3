"""Batched decoding (issue 28): records/s of whole `ministruct gen` processes at --parallel N.

Workloads, on each model: 32 records of samples/conj.json, 32 records of
samples/recipe.json (`gen --input`), and `gen --n 16` samples of one conj prompt (and,
when asked for, "conj withheld": the conj records with `--withhold-schema`, whose prompts
share only the chat template's beginning). Each
run is a fresh process, as a user runs it (the vocabulary and mask caches warm: one
warm-up run per model and schema first); its wall time covers loading the model,
compiling the constraint, every generation and writing the records. For each workload
the values of N run back to back, and speed-ups are against N = 1 of the same round
(the machine is shared: the load average before each run is printed beside it). Beside
records per wall second, records per CPU second of the process (user + system): on a
machine that other processes keep busy, wall time mostly measures their load, while CPU
time measures the work (it charges the mask thread's overlap, so it understates the
gain an idle machine sees).

Every output is checked: complete, valid JSON for the schema (jsonschema), records in
input order. `same` counts the results whose output equals N = 1's: batched rows differ
from rows computed alone in the last bits, which can change a sampled token.

    .venv/bin/python benchmarks/throughput.py [--models smollm2,gemma3] [--parallel 1,4,8,16]
                                              [--rounds 1] [--records 32] [--changes 16] [--json out.json]
                                              [--threads N]

The defaults run everything the issue asks in one go: both models, the three workloads,
N = 1, 4, 8, 16 (about 40 minutes on the idle 2-core machine). `--json` is rewritten after
every row; a failed `gen` process is reported in its row and the run goes on.

`--changes K` adds an in-process measure of how often batching changes a token: greedy
decoding of K prompts at each N against N = 1 (token_changes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
from model_files import model_path  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parent.parent
VERBS = ["comer", "vivir", "hablar", "ser", "tener", "ir", "hacer", "decir", "poder", "ver", "dar", "saber"]
TENSES = ["presente", "pretérito", "imperfecto", "futuro"]
PERSONS = ["1st person singular", "2nd person singular", "3rd person plural"]
DISHES = ["pancakes", "tomato soup", "guacamole", "fried rice", "lemonade", "omelette", "hummus", "pesto"]
WORKLOADS = {  # name: (schema, max_tokens)
    "conj": ("samples/conj.json", 64),
    "recipe": ("samples/recipe.json", 192),
    "conj --n 16": ("samples/conj.json", 64),
    "conj withheld": ("samples/conj.json", 64),  # not by default: the schema not in the prompt
}


def prompts(workload: str, n: int) -> list[str]:
    """n different prompts (up to 144 conj, 64 recipe; then they repeat). Every record has
    the command's seed, so a prompt given twice is the same generation twice, and batching
    evaluates it once (docs/batches.md, lines): repeats would measure that, not batching."""
    if workload.startswith("conj"):
        verbs, tenses, persons = len(VERBS), len(TENSES), len(PERSONS)
        return [
            f"Conjugate the Spanish verb '{VERBS[i % verbs]}' in the {TENSES[i // verbs % tenses]} tense, "
            f"{PERSONS[i // (verbs * tenses) % persons]}."
            for i in range(n)
        ]
    return [
        f"Give a short recipe for {DISHES[i % len(DISHES)]} for {2 + i // len(DISHES) % 8} people." for i in range(n)
    ]


def load() -> float:
    return os.getloadavg()[0]


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


GEN_OPTIONS: list[str] = []  # given to every gen process (--threads)


class RunFailed(Exception):
    """A `gen` process that failed: the benchmark says so and goes on with the next workload."""


def run(model: str, workload: str, parallel: int, n_records: int, folder: Path) -> dict:
    """One fresh `ministruct gen` process; its wall time and checked results."""
    schema, max_tokens = WORKLOADS[workload]
    cmd = [sys.executable, "-m", "ministruct", "gen", "--model", model, "--schema", str(ROOT / schema)]
    cmd += ["--max-tokens", str(max_tokens), "--parallel", str(parallel), "--no-progress", "--quiet"]
    cmd += GEN_OPTIONS
    if workload.endswith("withheld"):
        cmd += ["--withhold-schema"]
    if workload.endswith("--n 16"):
        cmd += ["--n", "16", "--format", "jsonl", prompts(workload, 1)[0]]
        expected = [1] * 16
    else:
        path = folder / f"{workload}.jsonl"
        path.write_text(
            "".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(prompts(workload, n_records)))
        )
        cmd += ["--input", str(path)]
        expected = list(range(n_records))
    before = load()
    cpu0 = _children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    wall = time.perf_counter() - t0
    cpu = _children_cpu() - cpu0
    if proc.returncode not in (0, 1):
        raise RunFailed(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr.strip()[-2000:]}")
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    validator = jsonschema.Draft202012Validator(json.loads((ROOT / schema).read_text()))
    valid = sum(r["complete"] and validator.is_valid(json.loads(r["output"])) for r in recs)
    return {
        "wall_s": wall,
        "records_per_s": len(recs) / wall,
        "cpu_s": cpu,
        "records_per_cpu_s": len(recs) / cpu,
        "in_order": [r["id"] for r in recs] == expected,
        "complete_valid": valid,
        "n": len(recs),
        "outputs": [r["output"] for r in recs],
        "load_before": before,
    }


def token_changes(model_file: str, ns: list[int], n_prompts: int) -> list[dict]:
    """How often batching changes a token (in process): greedy decoding (temperature 0)
    of the conj and recipe prompts at each N against N = 1. A change is an argmax that
    flipped on rows computed in a batch; after the first one the outputs part ways, so the
    count is of records that changed and of the tokens before their first change."""
    from ministruct.decode.model import Model
    from ministruct.decode.sampling import SamplingParams
    from ministruct.grammar.constraint import load_constraint
    from ministruct.jobs.job import GenerationJob

    model = Model.load(model_file)
    rows = []
    for workload in ("conj", "recipe"):
        schema, max_tokens = WORKLOADS[workload]
        job = GenerationJob(
            model, load_constraint(schema=str(ROOT / schema)), SamplingParams(temperature=0), max_tokens=max_tokens
        )
        ps = prompts(workload, n_prompts)
        ref = [r.generation.tokens for r in job.run_many(ps, parallel=1)]
        for n in ns[1:]:
            got = [r.generation.tokens for r in job.run_many(ps, parallel=n)]
            changed = [a != b for a, b in zip(ref, got)]
            agree = sum(_common_prefix(a, b) for a, b in zip(ref, got))
            rows.append(
                {
                    "workload": workload,
                    "parallel": n,
                    "records_changed": f"{sum(changed)}/{len(ps)}",
                    "tokens_before_first_change": f"{agree}/{sum(len(a) for a in ref)}",
                    "changes_per_1000_tokens": round(1000 * sum(changed) / max(1, agree), 2),
                }
            )
            print(
                f"greedy {workload:7} N={n:<3} changed {rows[-1]['records_changed']} records; "
                f"tokens before the first change {rows[-1]['tokens_before_first_change']}; "
                f"{rows[-1]['changes_per_1000_tokens']} changes per 1000 tokens",
                flush=True,
            )
    model.close()
    return rows


def _common_prefix(a: list[int], b: list[int]) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--parallel", default="1,4,8,16")
    ap.add_argument("--workloads", default=",".join(w for w in WORKLOADS if not w.endswith("withheld")))
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--records", type=int, default=32)
    ap.add_argument("--json", default=None)
    ap.add_argument("--changes", type=int, default=0, help="also measure token changes on this many prompts")
    ap.add_argument("--threads", type=int, default=None, help="gen's --threads (default: gen's own)")
    args = ap.parse_args()
    if args.threads is not None:
        GEN_OPTIONS.extend(["--threads", str(args.threads)])
    ns = [int(x) for x in args.parallel.split(",")]
    report = []
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} cores", flush=True)

    def save() -> None:  # after every row, so that a long run killed part way keeps its numbers
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in args.models.split(","):
            model = model_path(name)
            for workload in filter(None, args.workloads.split(",")):
                try:
                    run(model, workload, 1, 2, folder)  # warm-up: vocabulary and mask caches
                    rounds = [
                        {n: run(model, workload, n, args.records, folder) for n in ns} for _ in range(args.rounds)
                    ]
                except RunFailed as e:
                    print(f"{name:8} {workload:12} FAILED: {e}", flush=True)
                    report.append({"model": name, "workload": workload, "error": str(e)})
                    save()
                    continue
                for n in ns:
                    rates = [r[n]["records_per_s"] for r in rounds]
                    ratios = [r[n]["records_per_s"] / r[ns[0]]["records_per_s"] for r in rounds]
                    cpu_ratios = [r[n]["records_per_cpu_s"] / r[ns[0]]["records_per_cpu_s"] for r in rounds]
                    last = rounds[-1][n]
                    same = sum(a == b for a, b in zip(last["outputs"], rounds[-1][ns[0]]["outputs"]))
                    row = {
                        "model": name,
                        "workload": workload,
                        "parallel": n,
                        "records_per_s": statistics.median(rates),
                        "speedup": statistics.median(ratios),
                        "records_per_cpu_s": statistics.median(r[n]["records_per_cpu_s"] for r in rounds),
                        "cpu_speedup": statistics.median(cpu_ratios),
                        "wall_s": last["wall_s"],
                        "complete_valid": f"{last['complete_valid']}/{last['n']}",
                        "in_order": last["in_order"],
                        "same_as_first": f"{same}/{last['n']}",
                        "load_before": round(last["load_before"], 2),
                    }
                    report.append(row)
                    save()
                    print(
                        f"{name:8} {workload:12} N={n:<3} {row['records_per_s']:6.2f} rec/s  x{row['speedup']:.2f}  "
                        f"{row['records_per_cpu_s']:6.2f} rec/cpu-s  x{row['cpu_speedup']:.2f}  "
                        f"wall {row['wall_s']:6.1f}s  valid {row['complete_valid']}  in order {row['in_order']}  "
                        f"same as N={ns[0]} {row['same_as_first']}  load {row['load_before']}",
                        flush=True,
                    )
    if args.changes:
        for name in args.models.split(","):
            for row in token_changes(model_path(name), ns, args.changes):
                report.append({"model": name, **row})
    print(f"load average at end: {os.getloadavg()}")
    save()


if __name__ == "__main__":
    main()
