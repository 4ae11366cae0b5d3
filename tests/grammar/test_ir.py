"""grammar/ir.py helpers."""

from __future__ import annotations

import gc

import pytest

from ministruct.errors import UsageError
from ministruct.grammar.ir import Grammar, gc_paused


def test_objects_built_with_the_collector_paused_join_the_oldest_generation():
    """Left young, the next two collections (in whatever runs next) would each traverse them."""
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        built = [[i] for i in range(5000)]
    assert gc.isenabled()
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in built)
    young = {id(o) for o in gc.get_objects(generation=0)} | {id(o) for o in gc.get_objects(generation=1)}
    assert not any(id(x) in young for x in built)


def test_a_collector_the_caller_disabled_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_objects_the_program_froze_stay_frozen():
    """A program that froze its objects (before forking workers) keeps them out of collections."""
    kept = [[i] for i in range(100)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gc_paused():
            built = [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen
        assert built and kept
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(
    "choices, reason",
    [
        ([], "at least one"),
        ("yes", "a list of strings, got 'yes'"),  # was: one of "y", "e", "s"
        (["a", 1], "a list of strings"),  # was: AttributeError: 'int' object has no attribute 'encode'
    ],
)
def test_choices_that_are_not_a_list_of_strings_are_a_usage_error(choices, reason):
    with pytest.raises(UsageError, match=reason) as e:
        Grammar.from_choices(choices)
    assert e.value.parameter == "choices"
