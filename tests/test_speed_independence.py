"""No test's verdict depends on the machine's speed (GUIDE: CI runs on busy machines):
hypothesis has no example deadline and no too-slow health check, in every test's settings."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parent


def test_the_default_profile_has_no_deadline_and_no_too_slow_check():
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def _settings_calls():
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "settings":
                yield f"{path.relative_to(TESTS)}:{node.lineno}", {k.arg: k.value for k in node.keywords}


def test_no_test_sets_a_deadline_or_turns_the_too_slow_check_back_on():
    found = list(_settings_calls())
    assert len(found) > 50  # (the scan sees the suite's hypothesis tests)
    for where, kw in found:
        deadline = kw.get("deadline")
        assert deadline is None or (isinstance(deadline, ast.Constant) and deadline.value is None), where
        checks = kw.get("suppress_health_check")
        if checks is not None:
            text = ast.unparse(checks)
            assert "too_slow" in text or text == "list(HealthCheck)", (where, text)
