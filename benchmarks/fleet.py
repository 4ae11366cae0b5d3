"""Benchmark: records/s on 1 vs 2 local llama-cpp-python servers, and what verification costs.

Starts two servers on the bundled model (llama_cpp.server, free ports), warms each
with `--warmup` records, then runs the same kind of batch (a regex constraint, raw prompts,
small max_tokens; a fresh set of prompts per run so no run reuses another's prompt
cache) on server 1 alone and on both, `--repeat` times each, alternating which goes
first. Prints records/s
for each and the ratio (2 servers / 1 server) from the same run. Then the verification
overhead per record: our check of every returned output (exact match for the regex;
JSON parse plus Draft 2020-12 validation for a small schema), in microseconds.

    .venv/bin/python benchmarks/fleet.py [--records 24] [--repeat 3] [--max-tokens 4] [--warmup 16]

On a 2-core machine each server gets one thread, so 2 servers can at best double the
rate; what other processes take from the cores shows in the ratio. A server's first
dozen or so requests here are erratic (seconds instead of a fraction of one), hence
the warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from ministruct.decode.gguf import default_model_path
from ministruct.decode.sampling import SamplingParams
from ministruct.fleet import FleetBatch, Settings, Verifier, connect
from ministruct.fleet.serve import LocalServer
from ministruct.grammar.constraint import Constraint, load_constraint
from ministruct.jobs.records import InputRecord

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "day": {"type": "string", "format": "date"}},
    "required": ["n"],
}
SCHEMA_OUTPUTS = ['{"n": 42, "day": "2026-12-01"}', '{ "day":"2024-02-29" , "n":7 }', '{"n": "x"}', "not json"]


def run_batch(urls: list[str], c: Constraint, settings: Settings, prompts: list[str]) -> tuple[float, list[str]]:
    """Seconds for the batch, and the outputs (every one must be verified)."""
    servers = connect(urls, c, settings, kind="llama")
    recs = [InputRecord(i + 1, i, p) for i, p in enumerate(prompts)]
    outs: list[str] = []
    t0 = time.perf_counter()
    status = FleetBatch(servers, c, settings).run(recs, lambda r: outs.append(r.result.output))
    dt = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"the batch on {urls} had unverified or failed records (status {status})")
    return dt, outs


def verify_us(v: Verifier, texts: list[str], rounds: int) -> float:
    """Mean microseconds of one verification over `texts`."""
    for t in texts:  # warm: automaton and validator caches
        v(t)
    t0 = time.perf_counter()
    for _ in range(rounds):
        for t in texts:
            v(t)
    return (time.perf_counter() - t0) / (rounds * len(texts)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=16, help="records sent to each server before timing")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    c = load_constraint(regex="[0-9]{2}")
    settings = Settings(SamplingParams(temperature=0.7, top_p=0.9), max_tokens=args.max_tokens, chat=False)
    servers = [LocalServer.start(default_model_path()) for _ in range(2)]
    try:
        for s in servers:
            s.wait_ready()
        urls = [s.url for s in servers]
        for u in urls:  # a server's first requests are slow (weights paged in, buffers grown)
            run_batch([u], c, settings, [f"Warm up {i}. A number:" for i in range(args.warmup)])
        rates: dict[int, list[float]] = {1: [], 2: []}
        outputs: list[str] = []
        load_before = os.getloadavg()[0]
        for r in range(args.repeat):
            for n in (1, 2) if r % 2 == 0 else (2, 1):
                prompts = [f"Run {r}.{n}, record {i}. A number:" for i in range(args.records)]
                dt, outs = run_batch(urls[:n], c, settings, prompts)
                rates[n].append(args.records / dt)
                outputs += outs
        load_after = os.getloadavg()[0]
    finally:
        for s in servers:
            s.kill()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    regex_us = verify_us(Verifier(c), outputs, 200)
    schema_us = verify_us(Verifier(load_constraint_schema()), SCHEMA_OUTPUTS, 500)
    result = {
        "records": args.records,
        "repeat": args.repeat,
        "max_tokens": args.max_tokens,
        "records_per_s": {"1_server": round(one, 2), "2_servers": round(two, 2)},
        "ratio_2_over_1": round(two / one, 2),
        "best_records_per_s": {"1_server": round(max(rates[1]), 2), "2_servers": round(max(rates[2]), 2)},
        "best_ratio_2_over_1": round(max(rates[2]) / max(rates[1]), 2),
        "verify_us_per_record": {"regex": round(regex_us, 1), "schema": round(schema_us, 1)},
        "verify_share_of_record_time": round(regex_us * 1e-6 * two, 5),
        "load_avg_1min": [round(load_before, 2), round(load_after, 2)],
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"batch: {args.records} records, regex [0-9]{{2}}, raw prompts, max_tokens {args.max_tokens}, median of {args.repeat}"
    )
    print(
        f"  load average (1 min) before/after the timed runs: {load_before:.2f} / {load_after:.2f} on {os.cpu_count()} cores"
    )
    print(f"  1 server : {one:7.2f} records/s   (runs: {', '.join(f'{x:.2f}' for x in rates[1])})")
    print(f"  2 servers: {two:7.2f} records/s   (runs: {', '.join(f'{x:.2f}' for x in rates[2])})")
    print(f"  ratio 2/1: {two / one:7.2f}   (best run of each: {max(rates[2]) / max(rates[1]):.2f})")
    print("verification per record (our own check, in the client):")
    print(f"  regex (exact match): {regex_us:8.1f} us")
    print(f"  schema (JSON + Draft 2020-12 with formats): {schema_us:8.1f} us")
    print(f"  share of a record's wall time at 2 servers: {result['verify_share_of_record_time']:.3%}")


def load_constraint_schema() -> Constraint:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(SCHEMA, f)
    try:
        return load_constraint(schema=f.name)
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    main()
