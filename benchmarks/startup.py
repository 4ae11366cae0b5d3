"""Whole processes, as a user runs them (issue 27): every number is a fresh `python -m
ministruct ...` (vocabulary and numba caches warm), timed from outside, against a
reference run in the same rounds; rounds alternate which side goes first; medians.

gen: `gen` on both bundled models, samples/conj.json and the README's first command,
against llama-cpp-python alone (a fresh process: import, load the same GGUF with the
same context and threads, `create_completion` on the same prompt token ids, the same
number of output tokens with every end-of-generation token banned, same sampling).
The prompt ids and the token count come from one traced `gen` before the clock.

Wall time and CPU time (user + system, from the kernel's accounting of the child) are
both reported: on a loaded machine wall time swings, CPU time much less.

commands: `check --schema` on one short text, `check --regex`, `--help`, beside
`python -c pass` (the interpreter alone).

masks: `bench --no-generate --json` in fresh processes: `first_mask_ms` (schema or
grammar read, compiled, first mask; vocabulary cache warm; the front end's modules
imported before the clock, `import_ms` apart) and the walk's mean, cold
walk (this process's first steps) and warm walk apart.

walks: 200-step walks in fresh `bench` processes, beside llguidance in a fresh process of
its own on the same walk (the tokens `bench` drew): conj.json and json.gbnf (`--rounds`
rounds, the median of each side: on these shared machines one fresh process in a few runs
at about half speed throughout, an idle machine too), and each schema of masks.py's
jsonschemabench sample (`--pool N`, one round; `--pool-rounds` more), whose median first
mask and pooled mean mask time (every step of every walk) are reported; and the 200-tool
file (`--tools ... --tool-choice required`), benchmarks/grammars/sql_select.lark and
python_expr.lark (`--lark`), each at seeds 0-5: all steps pooled, the median walk, the
worst p99.

    .venv/bin/python benchmarks/startup.py [--rounds 5] [--models smollm2,gemma3] [--pool 50]
                                           [--pool-rounds 1] [--json out.json]
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

from model_files import model_path  # (beside this file)

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
CHECK_TEXT = '{"verb":"comer","tense":"futuro","person":"3rd","form":"comerá"}'
GEN_CASES = {
    "conj": ["--schema", "samples/conj.json", "Conjugate 'comer', 3rd person, future"],
    "readme": ["--schema", "samples/capital.json", "What is the capital of France?"],
}
MASK_CASES = {"conj": ["--schema", "samples/conj.json"], "json.gbnf": ["--grammar", "json"]}
TARGET_GEN = 1.15
TARGET_CHECK_SCHEMA_S = 0.6
TARGET_CHECK_REGEX_S = 0.5
TARGET_HELP_S = 0.5
TARGET_FIRST_MASK_MS = 10.0  # issue 49: the first mask of a fresh process, front-end imports apart (import_ms)
TARGET_POOL_RATIO = 2.0
WALK_STEPS = 200
SEEDS = 6  # walks of the 200-tool file and of the Lark grammars (seeds 0-5): issues 24 and 25's mask target, p99 under 1 ms in each

# llguidance on one constraint in a fresh process of its own: argv: model, kind (schema or
# grammar), its file, seed, benchmarks folder, steps. The walk is the one `bench --seed` takes (drawn from our masks
# here, untimed), so both engines mask the same steps; prints llguidance's first mask
# (compile included) and its mask time at every step, in us
LLG_WALK = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[5])
import masks
from ministruct.decode.model import Model
from ministruct.diagnostics.bench import prepare_vocabulary, random_walk
from ministruct.engine.compile import compile_grammar
model = Model.load(sys.argv[1], vocab_only=True)
vocab = model.vocabulary
spec = masks.Spec("walk", sys.argv[2], open(sys.argv[3]).read(), sys.argv[3])
prepare_vocabulary(vocab)
tokens = random_walk(compile_grammar(spec.ours(), vocab, use_cache=False), int(sys.argv[6]), seed=int(sys.argv[4])).tokens
tok = masks.llg_tokenizer(model)
t0 = time.perf_counter()
llg = masks.Llg(tok, spec.theirs(), vocab.n_logits, np.zeros(vocab.n_logits, dtype=bool))
compile_us = (time.perf_counter() - t0) * 1e6
llg.replay(tokens, vocab.eog_ids)
print(json.dumps({"first_mask_ms": (compile_us + llg.mask_us[0]) / 1000, "mask_us": llg.mask_us, "rejected": llg.rejected}))
"""

# llama-cpp-python alone; argv: model, spec JSON (ids, n, sampling, eog, threads)
REFERENCE = """
import json, os, sys
import llama_cpp
spec = json.loads(sys.argv[2])
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=2048, seed=spec["seed"], n_threads=spec["threads"],
                      n_threads_batch=spec["threads"], verbose=False)
out = llm.create_completion(prompt=spec["ids"], max_tokens=spec["n"], temperature=spec["temperature"],
                            top_p=spec["top_p"], top_k=spec["top_k"], repeat_penalty=1.0, seed=spec["seed"],
                            logit_bias={t: float("-inf") for t in spec["eog"]})
print(out["usage"]["completion_tokens"])
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    return env


CPU: dict[tuple[str, ...], list[float]] = {}  # argv -> CPU seconds (user + system) of each run


def timed(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of one whole process, and its stdout (CalledProcessError on failure);
    its CPU seconds go to CPU (steadier than wall time on a loaded machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    CPU.setdefault(tuple(argv), []).append(cpu)
    return wall, done.stdout


def cpu_median(argv: list[str]) -> float:
    return round(statistics.median(CPU[tuple(argv)][1:] or CPU[tuple(argv)]), 3)  # the warm-up run left out


def ministruct(*args: str) -> list[str]:
    return [PY, "-m", "ministruct", *args]


def alternate(a: list[str], b: list[str], rounds: int) -> tuple[list[float], list[float], list[str]]:
    """`rounds` runs of each, the first side alternating; both warmed once first."""
    timed(a)
    timed(b)
    ta: list[float] = []
    tb: list[float] = []
    outs: list[str] = []
    for r in range(rounds):
        order = [(a, ta), (b, tb)] if r % 2 == 0 else [(b, tb), (a, ta)]
        for argv, sink in order:
            s, out = timed(argv)
            sink.append(s)
            if argv is a:
                outs.append(out)
    return ta, tb, outs


def gen_case(model: str, case: str, rounds: int) -> dict:
    path = model_path(model)
    args = [*GEN_CASES[case], "--model", path, "--format", "json"]
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        _, out = timed(ministruct("gen", *args, "--trace", str(trace)))
        header = json.loads(trace.read_text().splitlines()[0])
    n = json.loads(out)["n_tokens"]
    sys.path.insert(0, str(REPO / "src"))
    from ministruct.decode.model import Model

    vocab = Model.load(path, vocab_only=True).vocabulary
    sampling = header["sampling"]
    spec = {
        "ids": header["prompt_token_ids"],
        "n": n,
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "top_k": sampling["top_k"],
        "seed": sampling["seed"],
        "eog": sorted(vocab.eog_ids),
        "threads": max(1, (os.cpu_count() or 2) // 2),
    }
    mine, theirs = ministruct("gen", *args), [PY, "-c", REFERENCE, path, json.dumps(spec)]
    ours, ref, outs = alternate(mine, theirs, rounds)
    counts = sorted({json.loads(o)["n_tokens"] for o in outs})
    m_ours, m_ref = statistics.median(ours), statistics.median(ref)
    return {
        "model": model,
        "case": case,
        "prompt_tokens": len(spec["ids"]),
        "output_tokens": n,
        "output_tokens_seen": counts,
        "ministruct_s": round(m_ours, 3),
        "llama_cpp_s": round(m_ref, 3),
        "ratio": round(m_ours / m_ref, 3),
        "ministruct_cpu_s": cpu_median(mine),
        "llama_cpp_cpu_s": cpu_median(theirs),
        "cpu_ratio": round(cpu_median(mine) / cpu_median(theirs), 3),
        "target": TARGET_GEN,
        "met": m_ours / m_ref <= TARGET_GEN,
    }


def commands(rounds: int) -> list[dict]:
    bare = [PY, "-c", "pass"]
    cases = {
        "check --schema": (ministruct("check", "--schema", "samples/conj.json", CHECK_TEXT), TARGET_CHECK_SCHEMA_S),
        "check --regex": (ministruct("check", "--regex", "[0-9]{4}", "2024"), TARGET_CHECK_REGEX_S),
        "--help": (ministruct("--help"), TARGET_HELP_S),
    }
    rows = []
    for name, (argv, target) in cases.items():
        ours, ref, _ = alternate(argv, bare, rounds)
        m = statistics.median(ours)
        rows.append(
            {
                "command": name,
                "s": round(m, 3),
                "python_alone_s": round(statistics.median(ref), 3),
                "cpu_s": cpu_median(argv),
                "python_alone_cpu_s": cpu_median(bare),
                "target_s": target,
                "met": m <= target,
            }
        )
    return rows


def masks(model: str, rounds: int) -> list[dict]:
    path = model_path(model)
    rows = []
    for case, flags in MASK_CASES.items():
        argv = ministruct("bench", *flags, "--model", path, "--no-generate", "--json")
        timed(argv)
        reports = [json.loads(timed(argv)[1]) for _ in range(rounds)]
        first = statistics.median(r["first_mask_ms"] for r in reports)
        row = {
            "model": model,
            "case": case,
            "first_mask_ms": round(first, 2),
            "import_ms": round(statistics.median(r["import_ms"] for r in reports), 2),  # (before the clock)
            "mask_mean_us": round(statistics.median(r["mask_us"]["mean"] for r in reports), 2),
            "target_first_mask_ms": TARGET_FIRST_MASK_MS,
            "met": first <= TARGET_FIRST_MASK_MS,
        }
        for key in ("cold_mask_us", "warm_mask_us"):
            if key in reports[0]:
                row[key + "_mean"] = round(statistics.median(r[key]["mean"] for r in reports), 2)
        rows.append(row)
    return rows


def fresh_walk(path: str, spec, seed: int) -> dict:
    """One constraint's 200-step walk in a fresh `bench` process, and llguidance's on the
    same tokens in a fresh process of its own."""
    flags = {
        "schema": ["--schema", str(spec.path)],
        "grammar": ["--grammar", str(spec.path)],
        "tools": ["--tools", str(spec.path), "--tool-choice", "required", "--tool-format", "json"],  # (as masks.py)
        "lark": ["--lark", str(spec.path)],
    }[spec.kind]
    argv = ministruct("bench", *flags, "--model", path, "--no-generate", "--json")
    ours = json.loads(timed([*argv, "--steps", str(WALK_STEPS), "--seed", str(seed)])[1])
    bench_dir = str(REPO / "benchmarks")
    theirs = json.loads(
        timed([PY, "-c", LLG_WALK, path, spec.kind, str(spec.path), str(seed), bench_dir, str(WALK_STEPS)])[1]
    )
    return {
        "constraint": spec.name,
        "steps": ours["steps"],
        "mask_mean_us": ours["mask_us"]["mean"],
        "mask_max_us": ours["mask_us"]["max"],
        "mask_p99_us": ours["mask_us"]["p99"],
        "llg_mask_mean_us": round(sum(theirs["mask_us"]) / len(theirs["mask_us"]), 2),
        "first_mask_ms": ours["first_mask_ms"],
        "llg_first_mask_ms": round(theirs["first_mask_ms"], 3),
        "llg_rejected_our_token": theirs["rejected"],
    }


def median_walk(path: str, spec, seed: int, rounds: int) -> dict:
    """`fresh_walk` `rounds` times: the median of each side's mean and first mask (the
    rounds' means kept beside)."""
    runs = [fresh_walk(path, spec, seed) for _ in range(rounds)]
    out = dict(runs[0])
    for k in ("mask_mean_us", "llg_mask_mean_us", "first_mask_ms", "llg_first_mask_ms"):
        out[k] = statistics.median(r[k] for r in runs)
    out["mask_max_us"] = statistics.median(r["mask_max_us"] for r in runs)
    if rounds > 1:
        out["rounds_mask_mean_us"] = [r["mask_mean_us"] for r in runs]
        out["rounds_llg_mask_mean_us"] = [r["llg_mask_mean_us"] for r in runs]
    return out


def pooled(rows: list[dict]) -> tuple[float, float]:
    """Ours and llguidance's mean mask time over every step of these walks, in us."""
    steps = sum(r["steps"] for r in rows)
    return (
        sum(r["mask_mean_us"] * r["steps"] for r in rows) / steps,
        sum(r["llg_mask_mean_us"] * r["steps"] for r in rows) / steps,
    )


def seeded_walks(path: str, spec) -> dict:
    """A constraint's walks at seeds 0 to SEEDS - 1 (one walk says little: in the 200-tool
    file one spends its steps in names, another in e-mail addresses): all steps pooled, the
    median walk's ratio, the worst p99 and the walks whose p99 is over 1 ms."""
    rows = [fresh_walk(path, spec, seed) for seed in range(SEEDS)]
    ours, theirs = pooled(rows)
    p99 = max(r["mask_p99_us"] for r in rows)
    return {
        "constraint": f"{spec.name}, {SEEDS} walks",
        "mask_mean_us": round(ours, 2),
        "llg_mask_mean_us": round(theirs, 2),
        "ratio": round(ours / theirs, 3),
        "median_walk_ratio": round(statistics.median(r["mask_mean_us"] / r["llg_mask_mean_us"] for r in rows), 3),
        "p99_max_us": p99,
        "walks_p99_over_1ms": sum(r["mask_p99_us"] > 1000 for r in rows),
        "met": ours / theirs <= TARGET_POOL_RATIO and p99 < 1000,
        "llg_rejected_our_token": sum(r["llg_rejected_our_token"] for r in rows),
        "per_seed": rows,
    }


def walks(model: str, n: int, rounds: int = 1, pool_rounds: int = 1) -> list[dict]:
    """Fresh-process walks, ours and llguidance's: conj.json, json.gbnf (medians of
    `rounds`), and the pool of masks.py's schema sample (its median first mask and pooled
    mean; medians of `pool_rounds` per schema)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import masks as mb

    from ministruct.decode.model import Model

    path = model_path(model)
    loaded = Model.load(path, vocab_only=True)
    specs = mb.schema_sample(n, mb.llg_tokenizer(loaded), [])
    loaded.close()
    named = [s for s in mb.named_specs([]) if s.name in ("conj.json", "json.gbnf")]
    out = []
    for spec in named:
        r = median_walk(path, spec, 0, rounds)
        ratio = r["mask_mean_us"] / r["llg_mask_mean_us"]
        out.append({"model": model, **r, "ratio": round(ratio, 3), "met": ratio <= TARGET_POOL_RATIO})
    for spec in mb.named_specs([]):
        if spec.name in ("200 tools", "sql_select.lark", "python_expr.lark"):
            out.append({"model": model, **seeded_walks(path, spec)})
    rows = [median_walk(path, spec, i, pool_rounds) for i, spec in enumerate(specs)]
    ours, theirs = pooled(rows)
    first = statistics.median(r["first_mask_ms"] for r in rows)
    out.append(
        {
            "model": model,
            "constraint": f"pool of {len(rows)} schemas",
            "first_mask_ms_median": round(first, 2),
            "llg_first_mask_ms_median": round(statistics.median(r["llg_first_mask_ms"] for r in rows), 2),
            "mask_mean_us": round(ours, 2),
            "llg_mask_mean_us": round(theirs, 2),
            "ratio": round(ours / theirs, 3),
            "met": ours / theirs <= TARGET_POOL_RATIO and first <= TARGET_FIRST_MASK_MS,
            "llg_rejected_our_token": sum(r["llg_rejected_our_token"] for r in rows),
            "per_schema": rows,
        }
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--only", default="gen,commands,masks,walks", help="comma list: gen, commands, masks, walks")
    ap.add_argument("--pool", type=int, default=50, help="schemas of the jsonschemabench sample")
    ap.add_argument("--pool-rounds", type=int, default=1, help="walks per pool schema (the median of each side)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    only = set(args.only.split(","))
    report: dict[str, list[dict]] = {"gen": [], "commands": [], "masks": [], "walks": []}
    if "commands" in only:
        report["commands"] = commands(args.rounds)
        for r in report["commands"]:
            print(
                f"{r['command']:16} {r['s']:.3f} s, CPU {r['cpu_s']:.3f} s (python alone {r['python_alone_s']:.3f} s, "
                f"CPU {r['python_alone_cpu_s']:.3f} s; target <= {r['target_s']} s: {'met' if r['met'] else 'NOT met'})"
            )
    for model in models:
        if "gen" in only:
            for case in GEN_CASES:
                r = gen_case(model, case, args.rounds)
                report["gen"].append(r)
                print(
                    f"gen {model:8} {case:7} {r['ministruct_s']:.3f} s vs llama-cpp-python {r['llama_cpp_s']:.3f} s: "
                    f"{r['ratio']:.3f}x (target <= {TARGET_GEN}x: {'met' if r['met'] else 'NOT met'}); "
                    f"CPU {r['ministruct_cpu_s']:.2f} s vs {r['llama_cpp_cpu_s']:.2f} s: {r['cpu_ratio']:.3f}x; "
                    f"{r['prompt_tokens']} prompt + {r['output_tokens']} output tokens"
                )
        if "masks" in only:
            for r in masks(model, args.rounds):
                report["masks"].append(r)
                extra = "".join(f", {k} {v}" for k, v in r.items() if k.endswith("_us_mean"))
                print(
                    f"masks {model:8} {r['case']:9} first mask {r['first_mask_ms']:.1f} ms (target <= {TARGET_FIRST_MASK_MS} ms: "
                    f"{'met' if r['met'] else 'NOT met'}; front-end imports {r['import_ms']:.1f} ms apart), mean {r['mask_mean_us']:.1f} us{extra}"
                )
        if "walks" in only:
            for r in walks(model, args.pool, args.rounds, args.pool_rounds):
                report["walks"].append(r)
                first = (
                    f", first mask median {r['first_mask_ms_median']:.1f} ms (llguidance {r['llg_first_mask_ms_median']:.1f})"
                    if "first_mask_ms_median" in r
                    else ""
                )
                if "p99_max_us" in r:
                    first = (
                        f", median walk {r['median_walk_ratio']:.2f}x, worst p99 {r['p99_max_us'] / 1000:.2f} ms "
                        f"({r['walks_p99_over_1ms']} walks over 1 ms)"
                    )
                # a token of our walk llguidance refused leaves it masking a dead matcher (cheap) until the
                # walk's next reset, which lowers its mean: a few where the languages differ (ours takes
                # -0 under minimum 0, a const's "\/" escape), many when the layouts differ
                refused = r.get("llg_rejected_our_token", 0)
                print(
                    f"walk {model:8} {r['constraint']:20} fresh processes: mean {r['mask_mean_us']:.1f} us vs llguidance "
                    f"{r['llg_mask_mean_us']:.1f} us: {r['ratio']:.2f}x{first} (target <= {TARGET_POOL_RATIO}x: "
                    f"{'met' if r['met'] else 'NOT met'})"
                    + (
                        f"; llguidance refused {refused} of our tokens (masked a dead matcher after each)"
                        if refused
                        else ""
                    )
                )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
