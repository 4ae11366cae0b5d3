"""Decoding defaults the command line shows in its help, and their check (a leaf: importing
it loads nothing but errors.py)."""

from ministruct.errors import UsageError

DEFAULT_PARALLEL = 16  # the best of 1, 4, 8, 16 in benchmarks/throughput.py on the project machine (docs/batches.md)


def checked_parallel(parallel: object) -> int:
    """`parallel` when it is an integer >= 1 (generations decoded at once); else UsageError."""
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise UsageError(f"parallel must be an integer >= 1, got {parallel!r}", parameter="parallel")
    return parallel


def checked_max_tokens(max_tokens: object) -> int:
    """`max_tokens` when it is an integer >= 0 (a generation's token budget); else UsageError."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise UsageError(f"max_tokens must be an integer >= 0, got {max_tokens!r}", parameter="max_tokens")
    return max_tokens
