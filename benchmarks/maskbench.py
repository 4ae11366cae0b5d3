"""MaskBench's method (guidance-ai/jsonschemabench, maskbench/) on the shared half of its
data: real schemas, each met for the first time, and the tokens of real valid instances
replayed through ministruct, llguidance and XGrammar, each engine in fresh processes of
its own, timing the compile and every token's mask.

    .venv/bin/python benchmarks/maskbench.py                      # 500 schemas, both models
    .venv/bin/python benchmarks/maskbench.py --all                # every schema with a valid instance (4,884)
    nice .venv/bin/python benchmarks/maskbench.py --schemas 150 --json out.json

The sample: the suite's files sorted, shuffled with random.Random(--seed), those with at
least one valid instance, the first --schemas of them. Each valid instance is serialized
as MaskBench does (`json.dumps(data, indent=None, ensure_ascii=False)`: ", " and ": ";
with --layout compact "," and ":"), tokenized by the model's own tokenizer (llama.cpp, no
BOS; its bytes checked to be the instance's), and those token ids go to every engine.
Per token: the mask (timed), the token looked up in it, the engine advanced (timed); the
figure per token is both together, MaskBench's "time between masks". A token the mask
refuses ends the instance there: the schema is then not in the pooled comparison.

Fresh processes: schemas go in chunks (--chunk); each chunk runs in a new process per
engine, the engines' order rotating from chunk to chunk (on a busy machine the load then
falls alike on all three). A process first compiles and walks one throwaway schema
(untimed: first calls of each code path, as a long-running process has made them); its
tokenizer or vocabulary is built before the clock. No grammar caches: XGrammar's compiler
cache is off, llguidance keeps none, ministruct runs with MINISTRUCT_CACHE_DIR a new
folder per process, a copy of one that holds the vocabulary cache only (warm: its token
trie and slices, made by a `prepare` process) and no grammar. A schema that takes longer
than --schema-timeout, or a process that crashes, is recorded as such and the chunk goes
on in a new process. With --max-minutes no chunk starts past that time (per model): every
engine has then run the same chunks, and the figures cover those.

Reported per model, over the schemas all engines compile and take token for token (every
valid instance, every token): per-token mean / p50 / p99 (us), compile and compile + first
mask p50 / p99 (ms), ministruct's ratios to each peer; per engine the schemas it compiles,
those where it refused a token of a valid instance (with the token), and where it refused
the end after a whole instance. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from model_files import model_path  # noqa: E402  (beside this file)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))

SUITE = REPO / ".." / "shared" / "suites" / "jsonschemabench"
ENGINES = ("ministruct", "llguidance", "xgrammar")
WARMUP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "n": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "inner": {"type": "object", "properties": {"x": {"type": "number"}, "ok": {"type": "boolean"}}},
        # (the regex front end and the formats: their first calls, and the regex parser's
        # table in the template's cache, as on any machine that has run a pattern before)
        "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
        "when": {"type": "string", "format": "date"},
    },
    "required": ["name"],
}
WARMUP_INSTANCE = {
    "name": "warm up",
    "n": 3,
    "tags": ["a", "b"],
    "inner": {"x": 1.5, "ok": True},
    "code": "AB-12",
    "when": "2024-05-01",
}
TARGET_FIRST_MS = 2.0
SETUP_TIMEOUT_S = 600.0


# ---------------------------------------------------------------- the sample


def sample(n: int | None, seed: int) -> list[dict]:
    """Schemas with at least one valid instance: the folder sorted, shuffled with
    random.Random(seed), the first n (None: all)."""
    files = sorted(SUITE.glob("*.json"))
    random.Random(seed).shuffle(files)
    out = []
    for f in files:
        d = json.loads(f.read_text())
        valid = [t["data"] for t in d.get("tests", []) if t.get("valid")]
        if valid:
            out.append({"id": f.stem, "schema": d["schema"], "data": valid})
            if n is not None and len(out) >= n:
                break
    return out


def serialize(data: Any, layout: str) -> str:
    """The instance's text as MaskBench writes it (spaced), or compact."""
    if layout == "compact":
        return json.dumps(data, indent=None, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(data, indent=None, ensure_ascii=False)


def spaced_supported() -> bool:
    """Whether ministruct's schema front end has json.dumps' layout (`whitespace="spaced"`)."""
    from ministruct.errors import MinistructError
    from ministruct.grammar.schema.options import SchemaOptions

    try:
        SchemaOptions(whitespace="spaced")
    except MinistructError:
        return False
    return True


def tokenized_job(
    model_path: str, items: list[dict], layout: str, properties: str, folder: Path
) -> tuple[dict, list[str]]:
    """The job every engine process reads: token ids of each valid instance (the model's
    tokenizer; an instance whose tokens do not spell its bytes exactly is left out, with a
    note), and each schema as a file (ministruct reads it as `--schema FILE` would)."""
    from ministruct.decode.model import Model

    model = Model.load(model_path, vocab_only=True)
    vocab = model.vocabulary
    notes: list[str] = []

    def tokens_of(data: Any) -> list[int] | None:
        text = serialize(data, layout)
        ids = model.tokenize(text, add_bos=False, special=False)
        return ids if vocab.decode(ids) == text.encode("utf-8") else None

    schemas = []
    for it in items:
        toks = [tokens_of(d) for d in it["data"]]
        if any(t is None for t in toks):
            notes.append(
                f"{it['id']}: {sum(t is None for t in toks)} instance(s) whose tokens do not spell their text: left out"
            )
        toks = [t for t in toks if t]
        if toks:
            (folder / f"{it['id']}.json").write_text(json.dumps(it["schema"]))
            schemas.append({"id": it["id"], "schema": it["schema"], "instances": toks})
    (folder / "warmup.json").write_text(json.dumps(WARMUP_SCHEMA))
    job = {
        "model": model_path,
        "n_vocab": vocab.n_logits,
        "layout": layout,
        "properties": properties,
        "folder": str(folder),
        "warmup": {"id": "warmup", "schema": WARMUP_SCHEMA, "instances": [tokens_of(WARMUP_INSTANCE)]},
        "schemas": schemas,
    }
    model.close()
    return job, notes


# ---------------------------------------------------------------- engine processes


def _env(cache: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if cache is not None:
        env["MINISTRUCT_CACHE_DIR"] = str(cache)
        env.pop("MINISTRUCT_NO_CACHE", None)
    return env


def _argv(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "maskbench_engines.py"), *args]


class Runner:
    """Runs one engine over ranges of a job's schemas in fresh processes; records every
    schema (a result, or a time-out or crash) in `records`."""

    def __init__(self, engine: str, job_file: Path, timeout_s: float, template: Path | None) -> None:
        self.engine, self.job_file, self.timeout_s, self.template = engine, job_file, timeout_s, template
        self.records: dict[int, dict] = {}
        self.failed: str | None = None  # the engine could not run at all
        self.processes = 0

    def run(self, lo: int, hi: int, ids: list[str]) -> None:
        while lo < hi and self.failed is None:
            lo = self._process(lo, hi, ids)

    def _process(self, lo: int, hi: int, ids: list[str]) -> int:
        """One fresh process from schema `lo`; returns where the next one starts."""
        cache = Path(tempfile.mkdtemp(prefix="maskbench-cache-")) if self.template else None
        if cache is not None:
            shutil.copytree(self.template, cache, dirs_exist_ok=True)
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            _argv(self.engine, str(self.job_file), str(lo), str(hi)),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=_env(cache),
        )
        self.processes += 1
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            for x in proc.stdout:  # type: ignore[union-attr]
                lines.put(x)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        current, next_i = None, lo  # the schema running, the first not done yet
        deadline = time.monotonic() + SETUP_TIMEOUT_S  # loading the vocabulary, the throwaway schema
        try:
            while True:
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    proc.kill()
                    proc.wait()
                    if current is not None:
                        self.records[current] = {
                            "id": ids[current],
                            "timeout": f"timed out (over {self.timeout_s:g} s)",
                        }
                        return current + 1
                    if next_i == lo:  # never got to a schema
                        self.failed = f"no schema started within {SETUP_TIMEOUT_S:.0f} s"
                        return hi
                    return next_i  # hung between schemas: go on in a new process
                if line is None:
                    break
                msg = json.loads(line)
                if msg["event"] == "start":
                    current, deadline = msg["i"], time.monotonic() + self.timeout_s
                else:
                    self.records[msg["i"]] = msg["record"]
                    current, next_i = None, msg["i"] + 1
                    deadline = time.monotonic() + SETUP_TIMEOUT_S  # the next start, or the process's exit
            rc = proc.wait()
            if current is not None:  # died inside a schema
                self.records[current] = {"id": ids[current], "crash": f"crashed (exit code {rc})"}
                return current + 1
            if next_i == lo:  # ended before its first schema
                err.seek(0)
                tail = err.read().decode("utf-8", "replace").strip().splitlines()[-3:]
                self.failed = f"exit code {rc}: {' / '.join(tail)[:400]}"
                return hi
            return next_i
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.close()
            if cache is not None:
                shutil.rmtree(cache, ignore_errors=True)


def prepare_template(job_file: Path) -> tuple[Path, list[str]]:
    """A cache folder holding ministruct's vocabulary cache and nothing of any sampled
    schema: a `prepare` process loads the vocabulary, builds its trie and slices and
    compiles the throwaway schema (nothing is persisted)."""
    folder = Path(tempfile.mkdtemp(prefix="maskbench-template-"))
    subprocess.run(_argv("prepare", str(job_file)), env=_env(folder), check=True, capture_output=True)
    kinds = sorted({str(p.relative_to(folder).parent) for p in folder.rglob("*") if p.is_file()})
    return folder, kinds


# ---------------------------------------------------------------- statistics


def per_token(rec: dict, what: str = "both") -> list[float]:
    """Per-token times of a schema's instances (us): mask, advance or both (MaskBench's)."""
    out: list[float] = []
    for inst in rec.get("instances", []):
        masks, adv = inst["mask_us"], inst["advance_us"]
        if what == "mask":
            out += masks
        elif what == "advance":
            out += adv
        else:
            out += [m + a for m, a in zip(masks, adv)] + masks[len(adv) :]
    return out


def took_every_token(rec: dict | None) -> bool:
    return bool(rec) and "instances" in rec and all(i["refused"] is None for i in rec["instances"])


def first_ms(rec: dict) -> float:
    return (rec["compile_us"] + rec["instances"][0]["mask_us"][0]) / 1000


def stats(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"mean": float("nan"), "p50": float("nan"), "p99": float("nan"), "n": 0}
    a = np.asarray(xs, dtype=np.float64)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p99": float(np.percentile(a, 99)),
        "n": int(a.size),
    }


def summarize(job: dict, runners: dict[str, Runner]) -> dict:
    """Per engine counts, and the pooled comparison over the schemas every engine that ran
    compiled and took token for token."""
    ran = [e for e, r in runners.items() if r.failed is None]
    n = len(job["schemas"])
    engines: dict[str, Any] = {}
    for e, r in runners.items():
        recs = [r.records.get(i) for i in range(n)]
        compiled = [x for x in recs if x and "instances" in x]
        refused = [x for x in compiled if not took_every_token(x)]
        engines[e] = {
            "failed": r.failed,
            "processes": r.processes,
            "compiled": len(compiled),
            "compile_errors": sum(1 for x in recs if x and "error" in x),
            "timeouts": sum(1 for x in recs if x and "timeout" in x),
            "crashes": sum(1 for x in recs if x and "crash" in x),
            "refused_a_token": len(refused),
            "end_refused": sum(1 for x in compiled for i in x["instances"] if i.get("end_ok") is False),
            "refusals": [
                {"id": x["id"], "instance": k, **inst["refused"]}
                for x in refused
                for k, inst in enumerate(x["instances"])
                if inst["refused"] is not None
            ],
            "errors": [
                {
                    "id": x["id"],
                    "error": ("did not compile: " + x["error"]) if "error" in x else x.get("timeout") or x.get("crash"),
                }
                for x in recs
                if x and "instances" not in x
            ],
        }
    pool = [i for i in range(n) if ran and all(took_every_token(runners[e].records.get(i)) for e in ran)]
    pooled: dict[str, Any] = {}
    for e in ran:
        recs = [runners[e].records[i] for i in pool]
        pooled[e] = {
            "per_token_us": stats([x for r in recs for x in per_token(r)]),
            "mask_us": stats([x for r in recs for x in per_token(r, "mask")]),
            "compile_ms": stats([r["compile_us"] / 1000 for r in recs]),
            "first_mask_ms": stats([first_ms(r) for r in recs]),
        }
    return {
        "schemas": n,
        "instances": sum(len(s["instances"]) for s in job["schemas"]),
        "tokens": sum(len(t) for s in job["schemas"] for t in s["instances"]),
        "engines": engines,
        "pool": [job["schemas"][i]["id"] for i in pool],
        "pool_instances": sum(len(job["schemas"][i]["instances"]) for i in pool),
        "pool_tokens": sum(len(t) for i in pool for t in job["schemas"][i]["instances"]),
        "pooled": pooled,
    }


# ---------------------------------------------------------------- report


def _r(a: float, b: float) -> str:
    return f"{a / b:8.2f}x" if b and b == b and a == a else "      n/a"


def print_model(name: str, n_vocab: int, s: dict) -> None:
    print(
        f"== {name} ({n_vocab:,} tokens): {s['schemas']} schemas, {s['instances']} valid instances, {s['tokens']:,} tokens"
    )
    print(
        f"{'engine':<12} {'compiled':>8} {'errors':>6} {'refused a token':>15} {'end refused':>11} {'timeouts':>8} {'crashes':>7} {'processes':>9}"
    )
    for e, x in s["engines"].items():
        if x["failed"]:
            print(f"{e:<12} not measured: {x['failed']}")
            continue
        print(
            f"{e:<12} {x['compiled']:>8} {x['compile_errors']:>6} {x['refused_a_token']:>15} {x['end_refused']:>11} "
            f"{x['timeouts']:>8} {x['crashes']:>7} {x['processes']:>9}"
        )
    p = s["pooled"]
    ran = list(p)
    print(
        f"pool: {len(s['pool'])} schemas that {', '.join(ran)} all compile and take token for token "
        f"({s['pool_instances']} instances, {s['pool_tokens']:,} tokens)"
    )
    if not ran or not s["pool"]:
        print_failures(s)
        print()
        return
    peers = [e for e in ran if e != "ministruct"] if "ministruct" in p else []
    head = f"{'':<34}" + "".join(f"{e:>12}" for e in ran) + "".join(f"{'ours/' + e[:3]:>10}" for e in peers)
    print(head)
    rows = [
        ("per token (mask + advance) us", "per_token_us", ("mean", "p50", "p99")),
        ("mask alone us", "mask_us", ("mean", "p50", "p99")),
        ("compile ms", "compile_ms", ("p50", "p99")),
        ("compile + first mask ms", "first_mask_ms", ("p50", "p99")),
    ]
    for label, key, cols in rows:
        for c in cols:
            vals = [p[e][key][c] for e in ran]
            line = f"{label + ' ' + c:<34}" + "".join(f"{v:12.1f}" if v >= 10 else f"{v:12.2f}" for v in vals)
            if "ministruct" in p:
                line += "".join(_r(p["ministruct"][key][c], p[e][key][c]) for e in peers)
            print(line)
    if "ministruct" in p and peers:
        o = p["ministruct"]
        best_mean = min(p[e]["per_token_us"]["mean"] for e in peers)
        best_p99 = min(p[e]["per_token_us"]["p99"] for e in peers)
        checks = [
            (f"mean <= the faster peer's ({best_mean:.1f} us)", o["per_token_us"]["mean"] <= best_mean),
            (f"p99 <= the lower peer p99 ({best_p99:.1f} us)", o["per_token_us"]["p99"] <= best_p99),
            (f"compile + first mask p50 <= {TARGET_FIRST_MS:g} ms", o["first_mask_ms"]["p50"] <= TARGET_FIRST_MS),
        ]
        if "llguidance" in p:
            checks.insert(
                1, ("p50 <= llguidance's", o["per_token_us"]["p50"] <= p["llguidance"]["per_token_us"]["p50"])
            )
        print("targets (issue 49): " + "; ".join(f"{t}: {'ok' if ok else 'MISS'}" for t, ok in checks))
    print_failures(s)
    print()


def print_failures(s: dict) -> None:
    """The schemas each engine did not compile, and the tokens of valid instances it refused."""
    for e, x in s["engines"].items():
        for err in x["errors"][:3]:
            print(f"  {e} {err['id']}: {err['error'][:180]}")
        if len(x["errors"]) > 3:
            print(f"  {e}: {len(x['errors']) - 3} more schemas not compiled, timed out or crashed (--json)")
        for ref in x["refusals"][:8]:
            print(
                f"  {e} refused {ref['id']} instance {ref['instance']} at token {ref['at']} {ref['text']!r} after {ref['after']!r}"
            )
        if len(x["refusals"]) > 8:
            print(f"  {e}: {len(x['refusals']) - 8} more refusals (--json)")


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(
            x.split(":", 1)[1].strip()
            for x in Path("/proc/cpuinfo").read_text().splitlines()
            if x.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for p in ("llguidance", "xgrammar", "torch", "llama_cpp_python"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    try:
        out["ministruct"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", type=int, default=500, help="schemas in the sample (default 500)")
    ap.add_argument("--all", action="store_true", help="every schema with a valid instance")
    ap.add_argument("--seed", type=int, default=0, help="the sample's shuffle")
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--layout", choices=("auto", "spaced", "compact"), default="auto",
                    help="spaced: json.dumps' ', ' and ': ' (MaskBench's); compact: ',' and ':'; auto: spaced where ministruct has it")  # fmt: skip
    ap.add_argument("--properties", choices=("explicit", "spec"), default="explicit",
                    help="explicit: objects carry the properties the schema names (ministruct's default, XGrammar's strict_mode); "
                    "spec: JSON Schema's meaning (XGrammar strict_mode=False); llguidance reads JSON Schema's meaning either way")  # fmt: skip
    ap.add_argument("--chunk", type=int, default=25, help="schemas per engine process")
    ap.add_argument("--schema-timeout", type=float, default=120.0, help="seconds one schema may take in one engine")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="per model: start no chunk after this many minutes; the figures cover the chunks done")  # fmt: skip
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    if not SUITE.is_dir():
        raise SystemExit(f"{SUITE} is missing: the jsonschemabench suite goes next to the repository")
    notes: list[str] = []
    layout = args.layout
    if layout == "auto":
        layout = "spaced" if spaced_supported() else "compact"
        if layout == "compact":
            notes.append(
                "ministruct has no spaced layout here: every engine gets compact JSON, instances re-serialized with ',' and ':'"
            )
    engines = [e for e in args.engines.split(",") if e]
    if "xgrammar" in engines and importlib.util.find_spec("xgrammar") is None:
        engines.remove("xgrammar")
        notes.append("XGrammar not measured: not installed (pip install -e '.[xgrammar]')")
    items = sample(None if args.all else args.schemas, args.seed)
    load_before = os.getloadavg()
    report: dict[str, Any] = {
        "v": 1,
        "machine": machine(),
        "versions": versions(),
        "args": vars(args),
        "layout": layout,
        "models": [],
    }
    sep = {"spaced": "', ' and ': '", "compact": "',' and ':'"}[layout]
    print(
        f"MaskBench's method: {len(items)} schemas of jsonschemabench (seed {args.seed}), layout {layout} ({sep}), "
        f"properties {args.properties}; {report['machine']['date_utc']} UTC, {report['machine']['cores']} cores, "
        f"load {load_before[0]:.1f}\n"
    )
    for key in [m for m in args.models.split(",") if m]:
        path = model_path(key)
        with tempfile.TemporaryDirectory(prefix="maskbench-") as tmp:
            folder = Path(tmp)
            job, tnotes = tokenized_job(path, items, layout, args.properties, folder)
            notes += [f"{key}: {x}" for x in tnotes]
            job_file = folder / "job.json"
            job_file.write_text(json.dumps(job))
            template, kinds = prepare_template(job_file) if "ministruct" in engines else (None, [])
            try:
                runners = {
                    e: Runner(e, job_file, args.schema_timeout, template if e == "ministruct" else None)
                    for e in engines
                }
                ids = [s["id"] for s in job["schemas"]]
                started = time.monotonic()
                for c, lo in enumerate(range(0, len(ids), args.chunk)):
                    if args.max_minutes is not None and time.monotonic() - started > 60 * args.max_minutes:
                        notes.append(
                            f"{key}: stopped after {lo} of {len(ids)} schemas (--max-minutes {args.max_minutes:g})"
                        )
                        job["schemas"], ids = job["schemas"][:lo], ids[:lo]
                        break
                    hi = min(lo + args.chunk, len(ids))
                    for e in engines[c % len(engines) :] + engines[: c % len(engines)]:
                        runners[e].run(lo, hi, ids)
                    print(
                        f"# {key}: {hi}/{len(ids)} schemas, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True
                    )
            finally:
                if template is not None:
                    shutil.rmtree(template, ignore_errors=True)
            s = summarize(job, runners)
            s.update({"model": key, "n_vocab": job["n_vocab"], "ministruct_cache_template": kinds})
            print_model(key, job["n_vocab"], s)
            s["records"] = {e: [r.records.get(i) for i in range(len(ids))] for e, r in runners.items()}
            report["models"].append(s)
    report["load"] = {"before": load_before, "after": os.getloadavg()}
    report["notes"] = notes
    print(f"load average before {load_before[0]:.1f}, after {report['load']['after'][0]:.1f}")
    for n in notes:
        print(f"  - {n}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
