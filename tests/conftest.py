"""Shared fixtures: the bundled SmolLM2 model, loaded once per session."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# A verdict never depends on the machine's speed (CI runs on busy machines): no example
# deadline, and no health check that fails a test for being slow. Every test's own
# settings() inherit this profile (tests/test_speed_independence.py holds the rule).
settings.register_profile("any-speed", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-speed")


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
    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    m = Model.load(bundled_model_path(), n_ctx=2048, seed=0)
    yield m
    m.close()


@pytest.fixture(scope="session")
def vocab(model):
    """The bundled model's Vocabulary."""
    return model.vocabulary


@pytest.fixture
def unbounded_warm(monkeypatch):
    """compile_grammar's warming (engine/compile.py, WARM_S) runs to the end instead of
    stopping at its time budget: what a compile leaves behind is then the same at any speed."""
    from ministruct.engine import compile as compile_module

    monkeypatch.setattr(compile_module, "WARM_S", float("inf"))
