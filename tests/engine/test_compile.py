"""compile_grammar (engine/compile.py): what binding a grammar to a vocabulary leaves behind."""

from __future__ import annotations

import gc
import json
from pathlib import Path

from ministruct import Constraint
from ministruct.engine.compile import compile_grammar

TOOLS = Path(__file__).resolve().parents[2] / "samples" / "tools" / "many_200.json"


def test_what_a_compile_makes_is_left_in_the_oldest_generation(vocab, unbounded_warm):
    """The configurations, chains and token sets a compile makes live as long as the
    grammar; left in the young generations, the collections that the first masks set off
    would traverse all of them (a millisecond or more, in the middle of generation).
    (The warming runs to its end here: at its time budget, a busy machine makes fewer.)"""
    constraint = Constraint.from_tools(json.loads(TOOLS.read_text()), choice="required")
    gc.collect()
    compiled = compile_grammar(constraint, vocab, use_cache=False, warm=True)
    assert len(compiled.configs) > 1_000  # (the warming made a good many)
    young = len(gc.get_objects(generation=0)) + len(gc.get_objects(generation=1))
    assert young < 1_000, young
