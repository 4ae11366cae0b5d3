"""Prompts to result records: what `gen` does for each prompt, as library calls.

In: a Model, a Constraint, SamplingParams, prompts or input records. Out: GenResults
and JSONL records. Never imports diagnostics, the fleet or the command line.

Files, in the order data flows through them:
    records.py          input records in (JSONL or plain lines), versioned records out
    job.py              GenerationJob: prompt text, chat template, decode, GenResult
    fight_warnings.py   the warnings about a model fighting the grammar
    batch.py            what gen and check batches share: per-record settings, tallies,
                        --resume, signals
    gen_batch.py        `gen --input` as a library call (JobPool, GenBatch)
"""
