"""End to end on real-world schemas: how many outputs are complete and valid?

Every Nth schema of ../shared/suites/jsonschemabench (schemas under 4,000 characters),
the bundled model, one chat prompt with the schema shown, temperature 0.7, top_p 0.9,
seed 1, at two token budgets. For each schema and budget:

- ministruct: `gen`'s library path (generation language, budget-aware closing);
- llama.cpp: its own schema converter and grammar sampler through llama-cpp-python
  (`LlamaGrammar.from_json_schema` + `create_chat_completion(grammar=...)`), each run in
  a child process (its grammar sampler can crash the process: crashes are counted).

An output counts when it parses as JSON and the `jsonschema` validator accepts it.

    .venv/bin/python benchmarks/e2e_schemas.py [--every 100] [--budgets 256,64] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / ".." / "shared" / "suites" / "jsonschemabench"
PROMPT = "Give one realistic example value."
MAX_CHARS = 4000


def is_valid(schema: object, text: str) -> bool:
    from jsonschema import Draft202012Validator, validators

    try:
        value = json.loads(text)
    except ValueError:
        return False
    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        return cls(schema).is_valid(value)
    except Exception:  # noqa: BLE001 - a schema the validator cannot use counts as not valid
        return False


def schemas(every: int) -> list[tuple[str, object]]:
    out = []
    for path in sorted(SUITE.glob("*.json"))[::every]:
        text = json.dumps(json.loads(path.read_text())["schema"])
        if len(text) < MAX_CHARS:
            out.append((path.stem, json.loads(text)))
    return out


def llama_child(schema_path: str, max_tokens: int, user: str) -> None:
    """Child process: llama.cpp's converter + grammar sampler; prints one JSON line."""
    import llama_cpp

    from ministruct.decode.gguf import bundled_model_path

    schema = json.loads(Path(schema_path).read_text())
    try:
        grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"refused": f"{type(e).__name__}: {e}"[:200]}))
        return
    llm = llama_cpp.Llama(str(bundled_model_path()), n_ctx=2048, seed=1, verbose=False)
    t0 = time.perf_counter()
    res = llm.create_chat_completion(
        messages=[{"role": "user", "content": user}],
        grammar=grammar,
        temperature=0.7,
        top_p=0.9,
        top_k=0,
        min_p=0.0,
        repeat_penalty=1.0,
        seed=1,
        max_tokens=max_tokens,
    )
    choice = res["choices"][0]
    print(
        json.dumps(
            {
                "output": choice["message"]["content"],
                "finish": choice["finish_reason"],
                "n_tokens": res["usage"]["completion_tokens"],
                "s": time.perf_counter() - t0,
            }
        )
    )


def run_llama(name: str, schema: object, max_tokens: int, user: str, tmp: Path) -> dict:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(schema))
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--llama-child", str(path), str(max_tokens), user],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    if p.returncode != 0:
        return {"status": "crash", "rc": p.returncode}
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    if "refused" in rec:
        return {"status": "refused", "why": rec["refused"]}
    return {
        "status": "valid" if is_valid(schema, rec["output"]) else "invalid",
        "n_tokens": rec["n_tokens"],
        "finish": rec["finish"],
        "s": rec["s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--budgets", default="256,64")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-llama", action="store_true")
    ap.add_argument("--skip", type=int, default=0, help="leave out the first N picked schemas (resume a long run)")
    ap.add_argument("--llama-child", nargs=3, default=None)
    args = ap.parse_args()
    if args.llama_child:
        llama_child(args.llama_child[0], int(args.llama_child[1]), args.llama_child[2])
        return

    import tempfile

    from ministruct.decode.model import Model
    from ministruct.decode.sampling import SamplingParams
    from ministruct.errors import BudgetTooSmall, MinistructError
    from ministruct.grammar.constraint import Constraint
    from ministruct.grammar.schema import schema_to_grammar
    from ministruct.jobs.job import GenerationJob

    budgets = [int(b) for b in args.budgets.split(",")]
    model = Model.load(n_ctx=4096)
    params = SamplingParams(temperature=0.7, top_p=0.9, seed=1)
    rows = []
    tmp = Path(tempfile.mkdtemp())
    picked = schemas(args.every)[args.skip :]
    print(f"{len(picked)} schemas (every {args.every}th under {MAX_CHARS} characters)", file=sys.stderr)
    for i, (name, schema) in enumerate(picked):
        row: dict = {"schema": name}
        try:
            g = schema_to_grammar(schema, source=name)
            c = Constraint("schema", g, name, json.dumps(schema), schema=schema)
        except MinistructError as e:
            row["ours"] = {b: {"status": "refused", "why": str(e)[:200]} for b in budgets}
            c = None
        user = f"{PROMPT}\n\nAnswer with JSON that matches this JSON Schema:\n{json.dumps(schema, ensure_ascii=False)}"
        if c is not None:
            row["ours"] = {}
            for b in budgets:
                job = GenerationJob(model, c, params, max_tokens=b)
                try:
                    t0 = time.perf_counter()
                    res = job.run(PROMPT)
                    ok = res.complete and is_valid(schema, res.output)
                    row["ours"][b] = {
                        "status": "valid" if ok else ("invalid" if res.complete else "incomplete"),
                        "n_tokens": res.n_tokens,
                        "s": time.perf_counter() - t0,
                        "budget_limited": res.budget_limited,
                        "warnings": len(res.warnings),
                    }
                except MinistructError as e:
                    row["ours"][b] = {
                        "status": "too_small" if isinstance(e, BudgetTooSmall) else "error",
                        "why": str(e)[:200],
                    }
        if not args.no_llama:
            row["llama"] = {b: run_llama(f"s{i}", schema, b, user, tmp) for b in budgets}
        rows.append(row)
        print(
            f"[{i + 1}/{len(picked)}] {name}: "
            + json.dumps({k: {b: v[b]["status"] for b in budgets} for k, v in row.items() if k != "schema"}),
            file=sys.stderr,
        )

    print(f"\n{'engine':10} {'budget':>6} {'compiled':>9} {'valid':>6} {'share':>7} {'crash':>6} {'limited':>8}")
    summary = {}
    for eng in ("ours", "llama"):
        for b in budgets:
            rs = [r[eng][b] for r in rows if eng in r]
            if not rs:
                continue
            compiled = [x for x in rs if x["status"] not in ("refused",)]
            valid = sum(x["status"] == "valid" for x in compiled)
            crash = sum(x["status"] == "crash" for x in rs)
            limited = sum(bool(x.get("budget_limited")) for x in rs)
            share = valid / len(compiled) if compiled else 0.0
            summary[f"{eng}@{b}"] = {
                "schemas": len(rs),
                "compiled": len(compiled),
                "valid": valid,
                "share": share,
                "crashes": crash,
            }
            label = "ministruct" if eng == "ours" else "llama.cpp"
            print(f"{label:10} {b:>6} {len(compiled):>9} {valid:>6} {share:>7.1%} {crash:>6} {limited:>8}")
    both = [
        r
        for r in rows
        if "llama" in r
        and all(r["ours"][b]["status"] != "refused" and r["llama"][b]["status"] != "refused" for b in budgets)
    ]
    for b in budgets:
        o = sum(r["ours"][b]["status"] == "valid" for r in both)
        l_ = sum(r["llama"][b]["status"] == "valid" for r in both)
        print(f"schemas both compile, budget {b}: {len(both)}; valid: ministruct {o}, llama.cpp {l_}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
