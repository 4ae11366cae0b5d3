"""Which front-end modules reading a constraint imports (grammar/constraint.py FRONT_ENDS)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ministruct.errors import UsageError
from ministruct.grammar.constraint import FRONT_ENDS, import_front_end

REPO = Path(__file__).resolve().parents[2]
SRC = str(REPO / "src")
CONJ = str(REPO / "samples" / "conj.json")
TOOL_MODULES = ("ministruct.grammar.tools", "ministruct.grammar.tool_grammar", "ministruct.grammar.tool_families")


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (this checkout's source first)."""
    probe = f"import sys\nsys.path.insert(0, {SRC!r})\n{code}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_reading_a_schema_or_a_grammar_imports_no_tool_call_front_end():
    loaded = _modules_after(
        "from ministruct.grammar.constraint import load_constraint\n"
        f"load_constraint(schema={CONJ!r})\n"
        "load_constraint(grammar='json')"
    )
    assert "ministruct.grammar.schema.compiler" in loaded and "ministruct.grammar.gbnf.parse" in loaded
    assert not loaded.intersection(TOOL_MODULES)


def test_reading_tools_imports_them():
    loaded = _modules_after(
        "from ministruct.grammar.constraint import Constraint\n"
        "Constraint.from_tools([{'type': 'function', 'function': {'name': 'f', 'parameters': {}}}], choice='required')"
    )
    assert set(TOOL_MODULES) <= loaded


@pytest.mark.parametrize("kind", sorted(FRONT_ENDS))
def test_import_front_end_imports_each_kinds_modules(kind):
    loaded = _modules_after(f"from ministruct.grammar.constraint import import_front_end\nimport_front_end({kind!r})")
    assert set(FRONT_ENDS[kind]) <= loaded


def test_import_front_end_names_an_unknown_kind():
    with pytest.raises(UsageError, match="no constraint kind 'yaml'") as e:
        import_front_end("yaml")
    assert e.value.parameter == "kind"
