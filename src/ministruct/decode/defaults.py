"""Decoding defaults the command line shows in its help (a leaf: importing it loads nothing)."""

DEFAULT_PARALLEL = 16  # the best of 1, 4, 8, 16 in benchmarks/throughput.py on the project machine (docs/batches.md)
