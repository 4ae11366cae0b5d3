"""GenerationJob's arguments: a wrong one is a UsageError naming its parameter, never a
TypeError or AttributeError from deep inside the decoder."""

from __future__ import annotations

import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.errors import UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.job import GenerationJob

YEAR = Constraint.from_regex("[0-9]{4}")
PARAMS = SamplingParams(seed=1)


@pytest.mark.parametrize("constraint", ["[0-9]{4}", YEAR.grammar])
def test_a_constraint_that_is_not_a_constraint_is_refused(model, constraint):
    # was: AttributeError: 'str' object has no attribute 'with_control_tokens', at run()
    with pytest.raises(UsageError, match="constraint must be a Constraint") as e:
        GenerationJob(model, constraint, PARAMS)
    assert e.value.parameter == "constraint"


@pytest.mark.parametrize("max_tokens", [None, "8", 2.5, True])
def test_max_tokens_must_be_an_integer(model, max_tokens):
    # was: TypeError: '<' not supported between instances of 'NoneType' and 'int', at run()
    with pytest.raises(UsageError, match="max_tokens must be an integer >= 0") as e:
        GenerationJob(model, YEAR, PARAMS, max_tokens=max_tokens)
    assert e.value.parameter == "max_tokens"


@pytest.mark.parametrize("prompt", [None, b"Pick a year:"])
def test_a_prompt_must_be_text(model, prompt):
    # was: TypeError: expected string or bytes-like object, got 'NoneType'
    with pytest.raises(UsageError, match="prompt must be a string") as e:
        GenerationJob(model, YEAR, PARAMS, max_tokens=8).run(prompt)
    assert e.value.parameter == "prompt"


def test_run_many_takes_a_list_of_prompts_and_a_seed_for_each(model):
    job = GenerationJob(model, YEAR, PARAMS, max_tokens=8)
    with pytest.raises(UsageError, match="prompts must be an iterable of strings, not one string"):
        list(job.run_many("Pick a year:"))  # was: one generation per character
    with pytest.raises(UsageError, match="seeds: 1 seed for more prompts") as e:
        list(job.run_many(["a", "b"], seeds=[1]))  # was: RuntimeError: generator raised StopIteration
    assert e.value.parameter == "seeds"


UNIQUE_COLOURS = {"type": "array", "items": {"type": "string", "maxLength": 6}, "uniqueItems": True, "maxItems": 4}


@pytest.mark.parametrize(
    ("output", "complete", "expected"),
    [
        ('["red", "blue"]', True, {"checked": True, "valid": True}),
        (
            '["red", "red"]',
            True,
            {"checked": True, "valid": False, "pointer": "/", "reason": '["red", "red"] has non-unique elements'},
        ),
        ('["red", "bl', False, {"checked": False, "valid": None}),
    ],
)
def test_a_lenient_schema_check_says_what_the_full_schema_says_of_the_output(model, output, complete, expected):
    """uniqueItems over free strings is not in the grammar (lenient): the record's
    schema_check names it and gives the validator's verdict on the output afterwards."""
    job = GenerationJob(model, Constraint.from_json_schema(UNIQUE_COLOURS, lenient=True), PARAMS, max_tokens=8)
    check = job.schema_check(output, complete)
    assert check == {"not_enforced": ["/uniqueItems"], **expected}
    said = job.lenient_warning(check)
    assert said.startswith("lenient: some keywords were not enforced (/uniqueItems); ")
    assert said.endswith(": valid" if expected["valid"] else "was not checked" if not complete else expected["reason"])


def test_an_exact_schema_has_no_schema_check(model):
    exact = {**UNIQUE_COLOURS, "items": {"enum": ["red", "blue", "green"]}}
    job = GenerationJob(model, Constraint.from_json_schema(exact, lenient=True), PARAMS, max_tokens=8)
    assert job.schema_check('["red", "blue"]', True) is None


def test_the_schema_check_reads_the_constraints_pointers_not_its_warning_text(model):
    """(A source name that looks like a warning's words once made the pointer "/x".)"""
    c = Constraint.from_json_schema(UNIQUE_COLOURS, lenient=True, source="odd: at /x: y; ignored (lenient)")
    job = GenerationJob(model, c, PARAMS, max_tokens=8)
    assert job.schema_check('["red", "blue"]', True) == {
        "not_enforced": ["/uniqueItems"],
        "checked": True,
        "valid": True,
    }
