"""Prompts to result records: what `gen` does for each prompt, as library calls.

In: a Model, a Constraint, SamplingParams, prompts or input records. Out: GenResults
and JSONL records. Never imports diagnostics, the fleet or the command line.

Files, in the order data flows through them:
    records.py          input records in (JSONL or plain lines), versioned records out
    ordered.py          results that finish out of order, released in input order
    job.py              GenerationJob: prompt text, chat template, decode, GenResult
                        (run_many: many prompts at once)
    fight_warnings.py   the warnings about a model fighting the grammar
    batch.py            what gen and check batches share: per-record settings, tallies,
                        --resume, signals
    gen_batch.py        `gen --input` as a library call (JobPool, GenBatch; many at once)
"""
