"""The collapse study's default grid and conditions (a leaf: the command line's help shows them)."""

CONDITIONS = ("shown", "withheld")
DEFAULT_TEMPERATURES = (0.0, 0.3, 0.5, 0.7, 1.0, 1.5)
DEFAULT_TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)
BLOCK_PER_SLOT = 4  # a batched study runs in blocks of this many generations per slot (runner.py)
