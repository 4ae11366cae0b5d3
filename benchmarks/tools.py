"""Tool calls on the real models: the 24 everyday prompts of samples/tools/ (the right tool
known for each), every choice mode, both bundled models.

    .venv/bin/python benchmarks/tools.py                    # both models, every mode
    .venv/bin/python benchmarks/tools.py --models smollm2 --modes required --json out.json

For each generation: do the calls parse, and does every call validate against its tool's
`parameters` (`jsonschema`, independent of our grammar)? Was the right tool called (a
measurement of the model, not of the constraint)? And the model's own `share` on the right
tool's name where the call picks it (tool_scores). `none` runs the first 4 prompts only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import jsonschema  # noqa: E402
from model_files import model_path  # noqa: E402  (beside this file)

from ministruct.decode.model import Model  # noqa: E402
from ministruct.decode.sampling import SamplingParams  # noqa: E402
from ministruct.grammar.constraint import Constraint  # noqa: E402
from ministruct.jobs.job import GenerationJob  # noqa: E402

TOOLS = json.loads((REPO / "samples" / "tools" / "everyday.json").read_text())
PROMPTS = [json.loads(line) for line in (REPO / "samples" / "tools" / "prompts.jsonl").read_text().splitlines() if line]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
MODES = ("required", "name", "auto", "none")


def valid(tool_calls: list[dict]) -> bool:
    """Every call names a known tool and its arguments validate (jsonschema, formats asserted)."""
    for tc in tool_calls:
        fn = tc["function"]
        if fn["name"] not in SCHEMAS:
            return False
        try:
            jsonschema.validate(
                json.loads(fn["arguments"]), SCHEMAS[fn["name"]], format_checker=jsonschema.FormatChecker()
            )
        except jsonschema.ValidationError:
            return False
    return True


def run_mode(model: Model, mode: str, fmt: str, max_tokens: int, temperature: float) -> dict:
    params = SamplingParams(temperature=temperature, top_p=0.9 if temperature else 1.0, seed=0)
    prompts = PROMPTS[:4] if mode == "none" else PROMPTS
    rows = []
    jobs: dict[str, GenerationJob] = {}
    t0 = time.perf_counter()
    for p in prompts:
        choice = p["tool"] if mode == "name" else mode
        if choice not in jobs:
            c = Constraint.from_tools(TOOLS, choice=choice, format=fmt)
            jobs[choice] = GenerationJob(model, c, params, max_tokens=max_tokens)
        res = jobs[choice].run(p["prompt"], rid=p["id"])
        calls = res.tool_calls
        names = [tc["function"]["name"] for tc in calls]
        share = None
        if res.tool_scores:
            share = next((s["share"] for s in res.tool_scores[0]["scores"] if s["name"] == p["tool"]), None)
        rows.append(
            {
                "id": p["id"],
                "tool": p["tool"],
                "called": names,
                "complete": res.complete,
                "stop_reason": res.stop_reason,
                "valid": bool(calls) and valid(calls),
                "right": names[:1] == [p["tool"]],
                "share_right": share,
                "n_tokens": res.n_tokens,
                "output": res.output,
            }
        )
    seconds = time.perf_counter() - t0
    n = len(rows)
    with_calls = [r for r in rows if r["called"]]
    shares = [r["share_right"] for r in rows if r["share_right"] is not None]
    return {
        "mode": mode,
        "n": n,
        "complete": sum(r["complete"] for r in rows),
        "with_calls": len(with_calls),
        "valid": sum(r["valid"] for r in rows),
        "right": sum(r["right"] for r in rows),
        "mean_share_right": round(sum(shares) / len(shares), 4) if shares else None,
        "seconds": round(seconds, 1),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--format", default="json")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args(argv)
    out = []
    for key in args.models.split(","):
        model = Model.load(model_path(key))
        for mode in args.modes.split(","):
            r = run_mode(model, mode, args.format, args.max_tokens, args.temperature)
            r["model"] = model.name
            out.append(r)
            if args.json_out:  # after every mode, so a long run keeps what it measured
                Path(args.json_out).write_text(json.dumps({"v": 1, "settings": vars(args), "runs": out}, indent=1))
            share = "-" if r["mean_share_right"] is None else f"{r['mean_share_right']:.3f}"
            print(
                f"{model.name:40s} {mode:9s} n={r['n']:2d} complete={r['complete']:2d} calls={r['with_calls']:2d} "
                f"valid={r['valid']:2d} right={r['right']:2d} mean_share_right={share} ({r['seconds']} s)",
                flush=True,
            )
        model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
