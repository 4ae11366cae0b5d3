"""The decode loop: stop rules, the step stream, and the sampler laws on the real model."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ministruct.cli.errors import exit_code
from ministruct.decode.loop import Decoder, Generation, Step, generate
from ministruct.decode.sampling import SamplingParams
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import ModelError, NoLegalContinuation, UsageError

# -- test matchers (the engine's Matcher has the same interface) -------------------


class MatcherDefaults:
    """The parts of the TokenMatcher protocol these test matchers share: masks computed
    on the spot, never terminated early, no completion bound (so no budget narrowing)."""

    def mask_ready(self, remaining=None) -> bool:
        return True

    def is_terminated(self) -> bool:
        return False

    def min_tokens_to_complete(self):
        return None


class SequenceMatcher(MatcherDefaults):
    """Allows exactly one token per step: the given sequence, then only EOG."""

    def __init__(self, ids, vocab: Vocabulary) -> None:
        self.ids, self.vocab, self.pos = list(ids), vocab, 0
        self.resets = 0

    def reset(self) -> None:
        self.pos = 0
        self.resets += 1

    def mask(self, remaining=None) -> np.ndarray:
        m = np.zeros(self.vocab.n_logits, bool)
        if self.pos < len(self.ids):
            m[self.ids[self.pos]] = True
        else:
            m[list(self.vocab.eog_ids)] = True
        return m

    def advance(self, token_id: int) -> None:
        assert token_id == self.ids[self.pos], "advanced with an illegal token"
        self.pos += 1

    def is_accepting(self) -> bool:
        return self.pos == len(self.ids)


class DigitsMatcher(MatcherDefaults):
    """1..max_len ASCII digits, tokens chosen from the vocabulary's bytes."""

    def __init__(self, vocab: Vocabulary, max_len: int, min_len: int = 1) -> None:
        self.vocab, self.max_len, self.min_len = vocab, max_len, min_len
        self.lengths = np.zeros(vocab.n_logits, np.int64)  # 0 = not a digits token
        for i in vocab.text_ids:
            t = vocab.tokens[i]
            if t.isdigit() and t.isascii():
                self.lengths[i] = len(t)
        self.out = b""

    def reset(self) -> None:
        self.out = b""

    def mask(self, remaining=None) -> np.ndarray:
        room = self.max_len - len(self.out)
        m = (self.lengths > 0) & (self.lengths <= room)
        if self.is_accepting():
            m[list(self.vocab.eog_ids)] = True
        return m

    def advance(self, token_id: int) -> None:
        t = self.vocab.tokens[token_id]
        assert t.isdigit() and len(self.out) + len(t) <= self.max_len
        self.out += t

    def is_accepting(self) -> bool:
        return self.min_len <= len(self.out) <= self.max_len


class AllowAll(MatcherDefaults):
    """Every logits row legal, always complete: the identity mask."""

    def __init__(self, n: int) -> None:
        self.n = n

    def reset(self) -> None: ...

    def mask(self, remaining=None) -> np.ndarray:
        return np.ones(self.n, bool)

    def advance(self, token_id: int) -> None: ...

    def is_accepting(self) -> bool:
        return True


class DeadEnd(MatcherDefaults):
    """Allows `ids` one per step, then nothing, never complete."""

    def __init__(self, ids, n: int) -> None:
        self.ids, self.n, self.pos = list(ids), n, 0

    def reset(self) -> None:
        self.pos = 0

    def mask(self, remaining=None) -> np.ndarray:
        m = np.zeros(self.n, bool)
        if self.pos < len(self.ids):
            m[self.ids[self.pos]] = True
        return m

    def advance(self, token_id: int) -> None:
        self.pos += 1

    def is_accepting(self) -> bool:
        return False


# -- a fake model: deterministic logits, records every eval --------------------------

FAKE_VOCAB = Vocabulary.from_bytes(
    [b"a", b"b", b"1", b"22", b"", b"x"], eog_ids=[4], control_text={4: "<eos>"}, n_logits=8
)


class FakeModel:
    """Logits prefer token (n_past % 4), and EOG once `eos_after` tokens were generated."""

    def __init__(self, eos_after: int = 10**9, n_ctx: int = 64) -> None:
        self.vocabulary = FAKE_VOCAB
        self.n_ctx = n_ctx
        self.tokens: list[int] = []
        self.evals: list[list[int]] = []
        self.prompt_len = 0
        self.eos_after = eos_after

    def prefill(self, tokens) -> int:
        self.tokens = list(tokens)
        self.prompt_len = len(tokens)
        self.evals.append(list(tokens))
        return 0

    def eval(self, tokens) -> None:
        self.tokens += list(tokens)
        self.evals.append(list(tokens))

    def logits(self) -> np.ndarray:
        z = np.zeros(8, np.float32)
        z[len(self.tokens) % 4] = 5.0
        if len(self.tokens) - self.prompt_len >= self.eos_after:
            z[4] = 9.0
        return z


GREEDY = SamplingParams(temperature=0.0)


def test_unconstrained_fake_max_tokens():
    m = FakeModel()
    dec = generate(m, [7, 7], None, GREEDY, max_tokens=5)
    steps = list(dec)
    res = dec.result
    assert [s.token_id for s in steps] == [2, 3, 0, 1, 2]  # n_past % 4
    assert res.tokens == [2, 3, 0, 1, 2] and res.output == b"122ab1"
    assert res.stop_reason == "max_tokens" and res.complete is False
    assert all(s.mask is None and s.mask_us == 0.0 for s in steps)
    # the last token is never evaluated; every other one is, one at a time
    assert m.evals == [[7, 7], [2], [3], [0], [1]]


def test_unconstrained_fake_eos():
    m = FakeModel(eos_after=3)
    dec = generate(m, [0], None, GREEDY, max_tokens=20)
    steps = list(dec)
    assert steps[-1].token_id == 4 and steps[-1].token == b""
    res = dec.result
    assert res.stop_reason == "eos" and res.complete is True
    assert res.tokens == [s.token_id for s in steps[:-1]] and 4 not in res.tokens
    assert res.n_steps == 4


def test_steps_carry_the_sampled_row():
    m = FakeModel()
    steps = list(generate(m, [1], DigitsMatcher(FAKE_VOCAB, 50), GREEDY, max_tokens=6))
    for s in steps:
        masked = np.where(s.mask, s.logits, -np.inf)
        assert s.token_id == int(np.argmax(masked))
        assert s.mask[s.token_id] and s.mask_us > 0
        assert isinstance(s, Step) and s.token == FAKE_VOCAB.tokens[s.token_id]


def test_grammar_done_appends_nothing():
    m = FakeModel()
    dec = generate(m, [1], SequenceMatcher([0, 3, 1], FAKE_VOCAB), SamplingParams(seed=3), max_tokens=10)
    steps = list(dec)
    res = dec.result
    assert [s.token_id for s in steps] == [0, 3, 1]
    assert res.output == b"a22b" and res.stop_reason == "grammar_done" and res.complete
    assert m.evals == [[1], [0], [3]]  # the last token is not evaluated: nothing follows it


def test_eos_drawn_under_a_grammar():
    m = FakeModel(eos_after=2)
    res = generate(m, [1], DigitsMatcher(FAKE_VOCAB, 10), GREEDY, max_tokens=10).run()
    # n_past 1 favours "b" (illegal): the tied digits go to the lowest id, "1"; then "1"; then EOG
    assert res.stop_reason == "eos" and res.complete and res.output == b"11"


def test_max_tokens_incomplete():
    m = FakeModel()
    matcher = DigitsMatcher(FAKE_VOCAB, 10, min_len=6)
    res = generate(m, [1], matcher, GREEDY, max_tokens=2).run()
    assert res.stop_reason == "max_tokens" and not res.complete and len(res.tokens) == 2


def test_no_legal_continuation():
    m = FakeModel()
    dec = generate(m, [1], DeadEnd([0, 1], 8), SamplingParams(seed=5), max_tokens=10)
    steps = list(dec)
    res = dec.result
    assert len(steps) == 2 and res.stop_reason == "no_legal_continuation"
    assert not res.complete
    assert isinstance(res.error, NoLegalContinuation)
    assert res.error.step == 2 and res.error.output == b"ab" and exit_code(res.error) == 1


def test_matcher_reset_between_generations():
    m = FakeModel()
    matcher = SequenceMatcher([1, 0], FAKE_VOCAB)
    first = generate(m, [3], matcher, SamplingParams(seed=1), max_tokens=5).run()
    second = generate(m, [3], matcher, SamplingParams(seed=1), max_tokens=5).run()
    assert first.tokens == second.tokens == [1, 0] and matcher.resets == 2


def test_decoder_contract():
    dec = generate(FakeModel(), [1], None, GREEDY, max_tokens=3)
    with pytest.raises(RuntimeError):
        dec.result
    assert isinstance(dec.run(), Generation)
    with pytest.raises(RuntimeError):
        dec.run()
    with pytest.raises(ModelError, match="n_ctx=8"):
        Decoder(FakeModel(n_ctx=8), [1] * 5, None, GREEDY, max_tokens=4)
    with pytest.raises(UsageError):
        Decoder(FakeModel(), [], None, GREEDY, max_tokens=4)
    empty = generate(FakeModel(), [1], None, GREEDY, max_tokens=0).run()
    assert empty.tokens == [] and empty.stop_reason == "max_tokens"


# -- the real model ----------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_prompt(model):
    text = model.format_prompt("Pick a number and write it.", chat=True)
    return model.tokenize(text, add_bos=False, special=True)


@pytest.mark.model
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_identity_law_real_model(model, chat_prompt, seed):
    params = SamplingParams(temperature=0.8, seed=seed)
    free = generate(model, chat_prompt, None, params, max_tokens=30)
    free_ids = [s.token_id for s in free]
    masked = generate(model, chat_prompt, AllowAll(model.n_logits), params, max_tokens=30)
    masked_ids = [s.token_id for s in masked]
    assert free_ids == masked_ids
    assert len(free_ids) >= 5


@pytest.mark.model
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.5])
def test_degenerate_law_real_model(model, vocab, chat_prompt, temperature):
    target = model.tokenize(" zebra quantum 42", add_bos=False, special=False)
    params = SamplingParams(temperature=temperature, top_p=0.9, seed=4)
    res = generate(model, chat_prompt, SequenceMatcher(target, vocab), params, max_tokens=20).run()
    assert res.tokens == target and res.output == b" zebra quantum 42"
    assert res.stop_reason == "grammar_done" and res.complete


@pytest.mark.model
def test_digits_real_model(model, vocab, chat_prompt):
    matcher = DigitsMatcher(vocab, 6)
    dec = generate(model, chat_prompt, matcher, SamplingParams(temperature=0.7, seed=0), max_tokens=12)
    steps = list(dec)
    res = dec.result
    assert res.output.isdigit() and 1 <= len(res.output) <= 6
    assert res.complete and res.stop_reason in ("eos", "grammar_done")
    assert all(s.mask[s.token_id] for s in steps)
    assert b"".join(s.token for s in steps) == res.output


@pytest.mark.model
def test_step_logits_match_a_fresh_eval(model, chat_prompt):
    """Each Step's row is the model's row for prompt + earlier tokens, evaluated the same way."""
    steps = list(generate(model, chat_prompt, None, SamplingParams(seed=7), max_tokens=5))
    model.reset()
    model.eval(chat_prompt)
    for s in steps:
        assert np.array_equal(model.logits(), s.logits)
        model.eval([s.token_id])


@pytest.mark.model
def test_repeated_generation_is_reproducible(model, chat_prompt):
    """A reused prompt cache gives bit-identical steps to a cold start."""
    params = SamplingParams(temperature=1.0, seed=11)
    model.reset()
    cold = list(generate(model, chat_prompt, None, params, max_tokens=10))
    warm = list(generate(model, chat_prompt, None, params, max_tokens=10))
    assert [s.token_id for s in cold] == [s.token_id for s in warm]
    assert all(np.array_equal(a.logits, b.logits) for a, b in zip(cold, warm))


@pytest.mark.model
def test_greedy_real_model_is_argmax(model, chat_prompt):
    steps = list(generate(model, chat_prompt, None, SamplingParams(temperature=0.0), max_tokens=8))
    assert all(s.token_id == int(np.argmax(s.logits)) for s in steps)


@pytest.mark.model
def test_with_the_engine_matcher(model, vocab):
    """End to end with the real engine: every output is in the language."""
    import ministruct.engine.compile as compile_mod
    import ministruct.engine.matcher as matcher_mod
    import ministruct.grammar.gbnf.parse as gbnf

    grammar = gbnf.parse_gbnf('root ::= "{\\"age\\": " [1-9] [0-9]{0,2} ", \\"ok\\": " ("true" | "false") "}"')
    matcher = matcher_mod.Matcher(compile_mod.compile_grammar(grammar, vocab))
    prompt = model.tokenize(
        model.format_prompt("Reply with JSON: an age and a boolean ok.", chat=True), add_bos=False, special=True
    )
    for seed in range(3):
        dec = generate(model, prompt, matcher, SamplingParams(temperature=1.0, top_p=0.95, seed=seed), max_tokens=40)
        steps = list(dec)
        res = dec.result
        assert re.fullmatch(rb'\{"age": [1-9][0-9]{0,2}, "ok": (true|false)\}', res.output), res.output
        assert res.complete and res.stop_reason in ("grammar_done", "eos")
        assert all(s.mask[s.token_id] for s in steps)
