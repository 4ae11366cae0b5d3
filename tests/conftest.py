"""Shared fixtures: the bundled SmolLM2 model, loaded once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def model():
    """The bundled SmolLM2-135M-Instruct (skips when it cannot be loaded)."""
    from ministruct.errors import ModelError
    from ministruct.model import Model, bundled_model_path

    try:
        m = Model.load(bundled_model_path(), n_ctx=2048, seed=0)
    except ModelError as e:
        pytest.skip(f"bundled model unavailable: {e}")
    yield m
    m.close()


@pytest.fixture(scope="session")
def vocab(model):
    """The bundled model's Vocabulary."""
    return model.vocabulary
