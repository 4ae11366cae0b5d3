"""The GGUF model file: where it is, and the exact vocabulary read from it (the bundled SmolLM2)."""

from __future__ import annotations

import pytest

from ministruct.decode.gguf import bundled_model_path, default_model_path


def test_default_model_path_env(monkeypatch, tmp_path):
    monkeypatch.setenv("MINISTRUCT_MODEL", str(tmp_path / "m.gguf"))
    assert default_model_path() == tmp_path / "m.gguf"
    monkeypatch.delenv("MINISTRUCT_MODEL")
    assert default_model_path() == bundled_model_path()
    assert bundled_model_path().name == "SmolLM2-135M-Instruct.Q4_1.gguf"


# -- the vocabulary -------------------------------------------------------------


@pytest.mark.model
def test_vocabulary_sizes(model, vocab):
    assert len(vocab.tokens) == 49152
    assert vocab.n_logits == 49152 == model.n_logits
    assert len(vocab.control_ids) == 17
    assert 2 in vocab.eog_ids and vocab.eog_ids <= vocab.control_ids
    assert vocab.control_text[2] == "<|im_end|>"
    assert vocab.control_text[1] == "<|im_start|>"
    assert all(vocab.tokens[i] == b"" for i in vocab.control_ids)
    assert all(vocab.tokens[i] for i in range(len(vocab.tokens)) if i not in vocab.control_ids)


@pytest.mark.model
def test_long_tokens_not_truncated(model, vocab):
    long_ids = [i for i, t in enumerate(vocab.tokens) if len(t) > 64]
    assert len(long_ids) == 7
    assert max(len(vocab.tokens[i]) for i in long_ids) > 64
    for i in long_ids:
        text = vocab.tokens[i].decode("utf-8")
        assert model.tokenize(text, add_bos=False, special=False) == [i]


@pytest.mark.model
def test_partial_utf8_tokens(vocab):
    def valid(b: bytes) -> bool:
        try:
            b.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False

    bad = [i for i, t in enumerate(vocab.tokens) if i not in vocab.control_ids and not valid(t)]
    assert len(bad) == 313  # architecture.md
