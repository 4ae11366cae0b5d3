"""Shared fixtures: the bundled SmolLM2 model, loaded once per session."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Tests never read or write the user's ministruct cache."""
    old = os.environ.get("MINISTRUCT_CACHE_DIR")
    os.environ["MINISTRUCT_CACHE_DIR"] = str(tmp_path_factory.mktemp("ministruct-cache"))
    yield
    if old is None:
        os.environ.pop("MINISTRUCT_CACHE_DIR", None)
    else:
        os.environ["MINISTRUCT_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def model():
    """The bundled SmolLM2-135M-Instruct. A required dependency: failing to load it fails
    the tests that need it (never a skip)."""
    from ministruct.decode.model import Model, bundled_model_path

    m = Model.load(bundled_model_path(), n_ctx=2048, seed=0)
    yield m
    m.close()


@pytest.fixture(scope="session")
def vocab(model):
    """The bundled model's Vocabulary."""
    return model.vocabulary
