"""The numbers behind every step (../shared/docs/diagnostics.md), and how they are shown.

In: Steps of a generation, compiled grammars, vocabularies. Out: StepRecords and
summaries, trace records, Rich tables, benchmark timings, the collapse study. Never
imports the fleet or the command line.

Files, in the order data flows through them:
    stats.py          per-step statistics (|L_t|, Z, KL, nuclei) and the summary
    trace.py          `--trace` JSONL records
    tokenizer.py      what in a vocabulary can surprise a grammar user
    grammar_info.py   what a compiled grammar looks like on a vocabulary
    bench.py          timed compiles, seeded random walks, decode rates
    render.py         Rich rendering of all of the above
    collapse/         the collapse study: grid.py, study.py, report.py, render.py
"""
