"""LogitsProcessor (logits_processor.py): a constraint inside llama-cpp-python's own
loop, on the real bundled model; outputs checked with ministruct's own checks."""

from __future__ import annotations

import re

import numpy as np
import pytest
from llama_cpp import Llama, LogitsProcessorList, StoppingCriteriaList

import ministruct as ms
from ministruct.decode.gguf import bundled_model_path
from ministruct.errors import BudgetTooSmall, ModelError, NoLegalContinuation, TokenRejected, UsageError

pytestmark = pytest.mark.model

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pet": {"type": "boolean"},
    },
    "required": ["name", "age", "pet"],
}


@pytest.fixture(scope="module")
def llm():
    """The bundled model as a plain llama_cpp.Llama, as a llama-cpp-python user loads it."""
    llm = Llama(model_path=str(bundled_model_path()), n_ctx=512, n_threads=1, n_threads_batch=1, verbose=False)
    yield llm
    llm.close()


def complete(llm, prompt: str, proc: ms.LogitsProcessor, *, max_tokens: int, seed: int, extra=()) -> dict:
    out = llm.create_completion(
        prompt,
        max_tokens=max_tokens,
        temperature=0.8,
        seed=seed,
        logits_processor=LogitsProcessorList([proc, *extra]),
        stopping_criteria=StoppingCriteriaList([proc.raise_on_error]),
    )
    return out["choices"][0]


def row_like_llama_cpp(scores: np.ndarray) -> np.ndarray:
    """The logits as llama-cpp-python hands them over: the `logit` field of a record array
    over llama_token_data (a strided float32 view, written in place)."""
    rec = np.zeros(len(scores), dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True))
    rec["id"] = np.arange(len(scores))
    rec["logit"] = scores
    return rec["logit"]


# -- through llama-cpp-python's create_completion -----------------------------------


def test_regex_output_is_complete_and_matches(llm):
    proc = ms.LogitsProcessor.from_model(llm, ms.load_constraint(regex="[0-9]{4}"), max_tokens=8)
    choice = complete(llm, "Pick a year between 1900 and 2000:", proc, max_tokens=8, seed=1)
    assert choice["finish_reason"] == "stop"  # the grammar was complete, so end-of-generation came
    assert re.fullmatch("[0-9]{4}", choice["text"]), choice
    assert proc.error is None


def test_schema_output_is_a_valid_instance(llm):
    proc = ms.LogitsProcessor.from_model(llm, ms.Constraint.from_json_schema(PERSON), max_tokens=40)
    choice = complete(llm, "A person described as JSON:", proc, max_tokens=40, seed=3)
    assert choice["finish_reason"] == "stop"
    assert ms.InstanceChecker(PERSON).check(choice["text"]).accepted, choice


def test_one_processor_serves_successive_calls(llm):
    proc = ms.LogitsProcessor.from_model(llm, ms.load_constraint(regex="(yes|no), [0-9]{2}"), max_tokens=12)
    for prompt, seed in (("Is the sky blue? Answer and give a number:", 1), ("Is fire cold?", 2)):
        choice = complete(llm, prompt, proc, max_tokens=12, seed=seed)
        assert choice["finish_reason"] == "stop", choice
        assert re.fullmatch("(yes|no), [0-9]{2}", choice["text"]), choice
        assert proc.prompt_len == len(llm.tokenize(prompt.encode()))  # this call's prompt, not the last one's
    # the same prompt again (a shorter id list than the last call's) also starts over
    again = complete(llm, "Is fire cold?", proc, max_tokens=12, seed=4)
    assert again["finish_reason"] == "stop" and re.fullmatch("(yes|no), [0-9]{2}", again["text"]), again


def test_the_budget_completes_open_ended_output_in_time(llm):
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
    proc = ms.LogitsProcessor.from_model(llm, ms.Constraint.from_json_schema(schema), max_tokens=12)
    choice = complete(llm, "A long story as JSON:", proc, max_tokens=12, seed=5)
    assert choice["finish_reason"] == "stop", choice
    assert ms.InstanceChecker(schema).check(choice["text"]).accepted, choice
    assert len(proc.output_ids) <= 11  # the output, then end-of-generation, in 12 tokens
    # without the budget the same draws run on inside the string and are cut
    plain = ms.LogitsProcessor.from_model(llm, ms.Constraint.from_json_schema(schema))
    assert complete(llm, "A long story as JSON:", plain, max_tokens=12, seed=5)["finish_reason"] == "length"


def test_a_ministruct_model_hands_over_its_llama(model):
    proc = ms.LogitsProcessor.from_model(model, ms.load_constraint(choice=["red", "green", "blue"]), max_tokens=6)
    llm = model.llama
    assert model.n_past == 0  # the Model forgets its context: the Llama will change it
    choice = complete(llm, "Name a colour:", proc, max_tokens=6, seed=1)
    assert choice["finish_reason"] == "stop" and choice["text"] in {"red", "green", "blue"}, choice


# llama.cpp's callback prints the processor's exception and carries on: expected here
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_emitted_token_against_the_grammar_leaves_create_completion(llm, vocab):
    x = next(t for t in range(vocab.n_logits) if vocab.tokens[t] == b"x")

    def force_x(input_ids, scores):  # a second processor that overrides the choice
        scores[x] = 1e4
        return scores

    proc = ms.LogitsProcessor.from_model(llm, ms.load_constraint(regex="[0-9]{4}"))
    with pytest.raises(TokenRejected, match="emitted against the grammar"):
        complete(llm, "Pick a year:", proc, max_tokens=6, seed=1, extra=[force_x])
    assert isinstance(proc.error, TokenRejected)


# -- the processor against the Matcher, ids fed by hand ------------------------------


def test_scores_are_minus_inf_exactly_where_the_matcher_forbids(model, vocab):
    compiled = ms.compile_grammar(ms.Constraint.from_json_schema(PERSON), vocab)
    proc = ms.LogitsProcessor(compiled)
    reference = ms.Matcher(compiled)
    eog = sorted(vocab.eog_ids)
    prompt = model.tokenize("A person:", add_bos=False, special=False)
    output = model.tokenize('{"name": "Al", "age": 7, "pet": true}', add_bos=False, special=False)
    rng = np.random.default_rng(0)
    for n in range(len(output) + 1):
        if n:
            reference.advance(output[n - 1])
        ids = np.asarray(prompt + output[:n], dtype=np.intc)
        raw = rng.normal(size=vocab.n_logits).astype(np.float32)
        scores = row_like_llama_cpp(raw)
        back = proc(ids, scores)
        legal = reference.mask()
        assert np.array_equal(np.isneginf(back), ~legal)
        assert np.array_equal(back[legal], raw[legal])  # legal rows untouched
        assert np.shares_memory(back, scores) and np.array_equal(scores, back)  # in place
        # end-of-generation only once the output is complete
        assert np.isfinite(back[eog]).all() == (n == len(output))
    assert proc.prompt_len == len(prompt) and proc.output_ids == output


def test_the_budget_uses_the_matchers_narrowed_masks(model, vocab):
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
    compiled = ms.compile_grammar(ms.Constraint.from_json_schema(schema), vocab)
    proc = ms.LogitsProcessor(compiled, max_tokens=10)
    reference = ms.Matcher(compiled)
    prompt = [1, 2, 3]
    output = model.tokenize('{"story": "Once upon', add_bos=False, special=False)
    narrowed = 0
    for n in range(len(output) + 1):
        if n:
            reference.advance(output[n - 1])
        back = proc(np.asarray(prompt + output[:n], dtype=np.intc), np.zeros(vocab.n_logits, np.float32))
        legal = reference.mask(10 - 1 - n)
        assert np.array_equal(np.isneginf(back), ~legal)
        narrowed += not np.array_equal(legal, reference.mask())
    assert narrowed  # the budget did narrow some step
    with pytest.raises(BudgetTooSmall, match="max_tokens=4"):  # four digits, then end-of-generation
        ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]{4}"), vocab), max_tokens=4)
    ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]{4}"), vocab), max_tokens=5)


def test_ids_that_do_not_extend_the_last_call_start_a_new_generation(model, vocab):
    proc = ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]+"), vocab))
    one = model.tokenize("1", add_bos=False, special=False)
    row = lambda: np.zeros(vocab.n_logits, np.float32)  # noqa: E731
    proc(np.array([5, 6, 7]), row())
    proc(np.array([5, 6, 7, *one]), row())
    assert (proc.prompt_len, proc.output_ids) == (3, one)
    for ids in ([5, 6, 7], [5, 6, 7, *one], [9, 6, 7, *one, *one]):  # same, shorter or another prefix
        proc(np.array([5, 6, 7, *one, *one]), row())
        proc(np.array(ids), row())
        assert (proc.prompt_len, proc.output_ids) == (len(ids), [])
    proc.reset()
    proc(np.array([5, 6, 7, *one, *one]), row())
    assert proc.prompt_len == 5


def test_an_illegal_emitted_token_raises_token_rejected(model, vocab):
    proc = ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]{4}"), vocab))
    x = model.tokenize("x", add_bos=False, special=False)
    proc(np.array([5, 6, 7]), np.zeros(vocab.n_logits, np.float32))
    scores = np.zeros(vocab.n_logits, np.float32)
    with pytest.raises(TokenRejected, match=r"output token 0 was emitted against the grammar after b''"):
        proc(np.array([5, 6, 7, *x]), scores)
    # inside llama.cpp's callback the exception is lost: the row leaves only end-of-generation
    eog = sorted(vocab.eog_ids)
    assert np.isfinite(scores[eog]).all() and np.isfinite(scores).sum() == len(eog)
    with pytest.raises(TokenRejected):
        proc.raise_on_error(None, None)
    proc(np.array([1, 2]), np.zeros(vocab.n_logits, np.float32))  # a new generation clears it
    assert proc.error is None and proc.raise_on_error(None, None) is False


def test_a_logits_row_of_another_width_is_a_clear_error(vocab):
    proc = ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]{4}"), vocab))
    with pytest.raises(UsageError, match=rf"has {vocab.n_logits - 1} entries .* vocabulary of {vocab.n_logits}"):
        proc(np.array([1, 2, 3]), np.zeros(vocab.n_logits - 1, np.float32))


def test_no_legal_token_is_no_legal_continuation(model, vocab):
    proc = ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("[0-9]{2}"), vocab))
    two = model.tokenize("12", add_bos=False, special=False)
    ids = [1]
    proc(np.array(ids), np.zeros(vocab.n_logits, np.float32))
    for t in two:
        ids.append(t)
        proc(np.array(ids), np.zeros(vocab.n_logits, np.float32))
    eog = min(vocab.eog_ids)
    with pytest.raises(NoLegalContinuation):  # end-of-generation emitted and evaluated: nothing may follow
        proc(np.array([*ids, eog]), np.zeros(vocab.n_logits, np.float32))


def test_from_model_checks_its_arguments(model, vocab):
    with pytest.raises(ModelError, match="expected a llama_cpp.Llama"):
        ms.LogitsProcessor.from_model(object(), ms.Constraint.from_regex("a"))
    with pytest.raises(UsageError, match="constraint must be a Constraint or a Grammar"):
        ms.LogitsProcessor.from_model(model, "[0-9]+")
    with pytest.raises(UsageError, match="max_tokens"):
        ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("a"), vocab), max_tokens=-1)
    # engine/budget.py's one rule: the output and end-of-generation must fit
    with pytest.raises(BudgetTooSmall):
        ms.LogitsProcessor(ms.compile_grammar(ms.Constraint.from_regex("a"), vocab), max_tokens=1)


def test_think_first_through_llama_cpp_python(llm):
    """The free-text-first grammar inside llama-cpp-python's loop: the thinking budget
    closes the thinking, the text after CLOSE is a valid instance (ministruct's check)."""
    c = ms.Constraint.from_json_schema({"type": "integer"}).think_first(close="</think>", open="<think>")
    proc = ms.LogitsProcessor.from_model(llm, c, max_tokens=40, think_tokens=8)
    choice = complete(llm, "What is 2 plus 2? Think inside <think> </think>, then answer.", proc, max_tokens=40, seed=2)
    assert choice["finish_reason"] == "stop" and proc.phase == "answer", choice
    thinking, _, answer = choice["text"].partition("</think>")
    assert ms.InstanceChecker({"type": "integer"}).check(answer).accepted, choice
    assert len(llm.tokenize(thinking.encode(), add_bos=False)) <= 8 + 2, choice
