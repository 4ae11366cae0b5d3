"""The model boundary on the bundled SmolLM2 (and on broken files)."""

from __future__ import annotations

import numpy as np
import pytest

from ministruct.cli.errors import exit_code
from ministruct.decode.gguf import GGUF_MAGIC, bundled_model_path
from ministruct.decode.model import Model
from ministruct.errors import ModelError

# -- loading errors (no model needed) -----------------------------------------


def _one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg
    return msg


def test_missing_file_is_a_model_error(tmp_path):
    path = tmp_path / "nope.gguf"
    with pytest.raises(ModelError) as ei:
        Model.load(path)
    msg = _one_line(ei.value)
    assert str(path) in msg and "not found" in msg
    assert exit_code(ei.value) == 2


def test_non_gguf_file_is_a_model_error(tmp_path):
    path = tmp_path / "weights.gguf"
    path.write_text("this is not a model\n" * 10)
    with pytest.raises(ModelError) as ei:
        Model.load(path)
    msg = _one_line(ei.value)
    assert str(path) in msg and "GGUF" in msg


def test_directory_is_a_model_error(tmp_path):
    with pytest.raises(ModelError) as ei:
        Model.load(tmp_path)
    assert str(tmp_path) in _one_line(ei.value)


def test_corrupt_gguf_is_a_model_error(tmp_path, capfd):
    path = tmp_path / "broken.gguf"
    path.write_bytes(GGUF_MAGIC + b"\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(ModelError) as ei:
        Model.load(path)
    msg = _one_line(ei.value)
    assert str(path) in msg and "cannot load" in msg
    assert capfd.readouterr().err == ""  # llama.cpp's logging is silenced


# -- text -------------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.parametrize(
    "text",
    ["Hello, world!", '{"name": "Ada", "age": 36}', "  indented\n\tcode()", "naïve café 日本語 🙂", "1234567890"],
)
def test_tokenize_round_trip(model, vocab, text):
    ids = model.tokenize(text, add_bos=False, special=False)
    assert ids and all(i not in vocab.control_ids for i in ids)
    assert vocab.decode(ids) == text.encode("utf-8")
    assert model.detokenize(ids) == text.encode("utf-8")


@pytest.mark.model
def test_tokenize_special(model, vocab):
    assert model.tokenize("<|im_end|>", add_bos=False, special=True) == [2]
    plain = model.tokenize("<|im_end|>", add_bos=False, special=False)
    assert len(plain) > 1 and not set(plain) & vocab.control_ids
    assert vocab.decode(plain) == b"<|im_end|>"


@pytest.mark.model
def test_format_prompt(model):
    assert model.format_prompt("Say hi", chat=False) == "Say hi"
    chat = model.format_prompt("Say hi", chat=True)
    assert "<|im_start|>user\nSay hi<|im_end|>" in chat
    assert chat.endswith("<|im_start|>assistant\n")
    sys_chat = model.format_prompt("Say hi", chat=True, system="Be brief.")
    assert sys_chat.startswith("<|im_start|>system\nBe brief.<|im_end|>")
    ids = model.tokenize(chat, add_bos=False, special=True)
    assert ids.count(1) == 3  # <|im_start|> parsed as control tokens


# -- evaluation -------------------------------------------------------------------


@pytest.mark.model
def test_logits_row_is_a_copy(model):
    ids = model.tokenize("The capital of France is", add_bos=False, special=False)
    model.reset()
    model.eval(ids)
    first = model.logits()
    assert first.dtype == np.float32 and first.shape == (model.n_logits,)
    assert np.isfinite(first).all()
    saved = first.copy()
    model.eval([int(np.argmax(first))])
    second = model.logits()
    assert np.array_equal(first, saved)  # not a view into llama.cpp's buffer
    assert not np.array_equal(first, second)
    assert model.n_past == len(ids) + 1


@pytest.mark.model
def test_prefill_reuse_is_exact(model):
    ids = model.tokenize("Once upon a time, there was", add_bos=False, special=False)
    model.reset()
    assert model.prefill(ids) == 0
    fresh = model.logits()
    model.eval([11, 12, 13])
    after_fresh = model.logits()
    assert model.prefill(ids) == len(ids)  # same prompt: KV cache and logits row reused
    assert model.evaluated == ids
    restored = model.logits()
    assert np.array_equal(restored, fresh)
    restored[:] = 0  # the caller owns its copy
    assert np.array_equal(model.logits(), fresh)
    model.eval([11, 12, 13])
    assert np.array_equal(model.logits(), after_fresh)
    other = ids[:-1]  # a mere prefix is re-evaluated from scratch
    assert model.prefill(other) == 0
    partial = model.logits()
    model.reset()
    model.eval(other)
    assert np.array_equal(model.logits(), partial)


@pytest.mark.model
def test_context_overflow_is_a_model_error():
    small = Model.load(bundled_model_path(), n_ctx=16)
    try:
        small.eval(list(range(100, 110)))
        with pytest.raises(ModelError, match="n_ctx=16"):
            small.eval(list(range(200, 210)))
    finally:
        small.close()


@pytest.mark.model
def test_vocab_only(vocab):
    vo = Model.load(bundled_model_path(), vocab_only=True)
    try:
        assert vo.vocabulary.fingerprint == vocab.fingerprint
        with pytest.raises(ModelError, match="vocab_only"):
            vo.eval([1])
    finally:
        vo.close()


@pytest.mark.model
def test_bad_token_id(model):
    with pytest.raises(ModelError, match="out of range"):
        model.eval([model.n_logits + 5])


@pytest.mark.model
def test_encode_prompt(model, vocab):
    chat = model.encode_prompt("Say hi", chat=True, system="Be brief.")
    assert chat == model.tokenize(
        model.format_prompt("Say hi", chat=True, system="Be brief."), add_bos=True, special=True
    )
    assert chat[0] == 1 and chat.count(2) == 2  # <|im_start|> ... two <|im_end|>
    raw = model.encode_prompt("x <|im_end|>", chat=False)
    assert not set(raw) & vocab.control_ids  # raw text never becomes control tokens
    assert vocab.decode(raw) == b"x <|im_end|>"


@pytest.mark.model
def test_a_background_load_gives_the_model_or_its_error(tmp_path):
    loading = Model.load_in_background(bundled_model_path(), vocab_only=True)
    model = loading.result()
    assert model.vocabulary.n_logits == Model.load(bundled_model_path(), vocab_only=True).vocabulary.n_logits
    assert loading.result() is model  # the outcome is kept
    missing = Model.load_in_background(tmp_path / "nope.gguf")
    with pytest.raises(ModelError, match="not found"):
        missing.result()
    with pytest.raises(ModelError, match="not found"):  # and raised again, not lost
        missing.result()
