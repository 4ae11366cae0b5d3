"""Think first or answer at once: accuracy on a small labeled task set, both bundled models.

    .venv/bin/python benchmarks/think.py                    # both models, 30 + 30 tasks
    .venv/bin/python benchmarks/think.py --models smollm2 --limit 10
    .venv/bin/python benchmarks/think.py --json think.json

Tasks: 30 arithmetic word problems (generated from `random.Random(0)`; the answer an
integer field `{"answer": N}`) and 30 sentiment sentences (`{"label": "positive" |
"negative"}`). Each prompt runs twice on the same seed: constrained from token 0, and with
`--think` (the plain `<think>` pair the prompt announces, `--think-tokens`, default 48).
Greedy decoding (temperature 0), so a run repeats exactly. Printed per model, task and
mode: accuracy, mean tokens spent thinking, how many thinkings the model closed itself,
mean seconds per prompt (in-process, the model loaded once: warm).

A measurement, not a target: these models are small; the harness is what a user runs on
their own model (`--model PATH` adds one).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from model_files import MODELS  # noqa: E402  (beside this file)
from model_files import model_path as bench_model_path  # noqa: E402

from ministruct.decode.model import Model  # noqa: E402
from ministruct.decode.sampling import SamplingParams  # noqa: E402
from ministruct.grammar.constraint import Constraint  # noqa: E402
from ministruct.jobs.job import GenerationJob  # noqa: E402
from ministruct.jobs.think import ThinkSettings  # noqa: E402

ARITHMETIC = {
    "type": "object",
    "properties": {"answer": {"type": "integer", "minimum": -1000, "maximum": 10000}},
    "required": ["answer"],
}
SENTIMENT = {"type": "object", "properties": {"label": {"enum": ["positive", "negative"]}}, "required": ["label"]}

POSITIVE = [
    "I loved this film, the actors were wonderful.",
    "The food was delicious and the staff were kind.",
    "What a great day at the beach with friends!",
    "This phone works perfectly and the battery lasts.",
    "The concert was amazing, I want to go again.",
    "My new shoes are comfortable and look great.",
    "The hotel room was clean, quiet and bright.",
    "She gave a brilliant talk that everyone enjoyed.",
    "The service was fast and the price was fair.",
    "I am so happy with how the garden turned out.",
    "This book is a delight from start to finish.",
    "The team played beautifully and won the cup.",
    "Our trip was relaxing and the views were stunning.",
    "The update made the app faster and easier to use.",
    "Thank you, the gift was exactly what I wanted.",
]
NEGATIVE = [
    "The movie was boring and far too long.",
    "The soup was cold and the waiter was rude.",
    "It rained all day and the trip was ruined.",
    "This laptop crashes every hour, I regret buying it.",
    "The concert was loud, badly mixed and overpriced.",
    "These shoes hurt my feet after ten minutes.",
    "The hotel room was dirty and smelled of smoke.",
    "His speech was dull and nobody listened.",
    "Delivery took three weeks and the box was broken.",
    "I am angry that the repair made things worse.",
    "This book is confusing and badly written.",
    "The team played terribly and lost again.",
    "The flight was delayed and they lost my bag.",
    "The update made the app slow and full of bugs.",
    "The gift arrived broken and support never answered.",
]


def arithmetic_tasks(n: int = 30) -> list[tuple[str, int]]:
    """n word problems with their integer answers (seeded)."""
    rnd = random.Random(0)
    things = ["apples", "books", "coins", "marbles", "stamps", "pencils"]
    names = ["Tom", "Anna", "Sam", "Lea", "Max", "Ida"]
    out = []
    for i in range(n):
        a, b = rnd.randint(2, 30), rnd.randint(2, 12)
        who, what = rnd.choice(names), rnd.choice(things)
        kind = i % 3
        if kind == 0:
            out.append((f"{who} has {a} {what} and gets {b} more. How many {what} does {who} have now?", a + b))
        elif kind == 1:
            a = a + b
            out.append((f"{who} had {a} {what} and gave away {b}. How many {what} are left?", a - b))
        else:
            a = a % 9 + 2
            out.append((f"{who} buys {a} boxes with {b} {what} in each. How many {what} in total?", a * b))
    return out


def sentiment_tasks() -> list[tuple[str, str]]:
    tasks = [(s, "positive") for s in POSITIVE] + [(s, "negative") for s in NEGATIVE]
    random.Random(1).shuffle(tasks)
    return [(f"Is the sentiment of this review positive or negative?\n{s}", label) for s, label in tasks]


def run_mode(job: GenerationJob, tasks: list, key: str) -> dict:
    """Accuracy and thinking figures of one job over labeled tasks."""
    right = closed = spent = 0
    t0 = time.perf_counter()
    for i, (prompt, want) in enumerate(tasks):
        res = job.run(prompt, rid=i, seed=0)
        got = res.json_value.get(key) if isinstance(res.json_value, dict) else None
        right += got == want
        if res.reasoning is not None:
            spent += res.think_tokens or 0
            closed += res.think_end == "closed"
    n = len(tasks)
    return {
        "n": n,
        "accuracy": right / n,
        "think_tokens_mean": spent / n if job.think is not None else None,
        "closed_by_model": closed if job.think is not None else None,
        "s_per_prompt": (time.perf_counter() - t0) / n,
    }


def model_path(name: str) -> str:
    """A benchmark model by name (model_files.py), or a GGUF path as given."""
    return bench_model_path(name) if name in MODELS else name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["smollm2", "gemma3"], help="smollm2, gemma3 or GGUF paths")
    ap.add_argument("--think-tokens", type=int, default=48)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--limit", type=int, default=30, help="tasks per task set")
    ap.add_argument("--json", help="also write every number to this file")
    args = ap.parse_args()
    sets = {
        "arithmetic": (Constraint.from_json_schema(ARITHMETIC), arithmetic_tasks()[: args.limit], "answer"),
        "sentiment": (Constraint.from_json_schema(SENTIMENT), sentiment_tasks()[: args.limit], "label"),
    }
    params = SamplingParams(temperature=0.0, seed=0)
    rows = []
    print(f"{'model':10} {'task':11} {'mode':8} {'acc':>6} {'think tok':>10} {'closed':>7} {'s/prompt':>9}")
    for name in args.models:
        model = Model.load(model_path(name), n_ctx=1024, seed=0)
        for task, (constraint, tasks, key) in sets.items():
            for mode in ("token0", "think"):
                think = ThinkSettings(think_tokens=args.think_tokens) if mode == "think" else None
                job = GenerationJob(model, constraint, params, max_tokens=args.max_tokens, think=think)
                r = {"model": name, "task": task, "mode": mode, **run_mode(job, tasks, key)}
                rows.append(r)
                tt = "-" if r["think_tokens_mean"] is None else f"{r['think_tokens_mean']:.1f}"
                cl = "-" if r["closed_by_model"] is None else f"{r['closed_by_model']}/{r['n']}"
                print(
                    f"{name:10} {task:11} {mode:8} {r['accuracy']:6.2f} {tt:>10} {cl:>7} {r['s_per_prompt']:9.2f}",
                    flush=True,
                )
        model.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
