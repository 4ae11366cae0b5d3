"""The public API: what `import ministruct` exposes, and the README's library examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ministruct

README = Path(__file__).resolve().parents[1] / "README.md"
LIBRARY = Path(__file__).resolve().parents[1] / "docs" / "library.md"


def test_all_names_exist_and_one_name_has_one_meaning():
    for name in ministruct.__all__:
        assert hasattr(ministruct, name), name
    from ministruct.decode.loop import TokenMatcher

    assert ministruct.Constraint is not TokenMatcher


def test_importing_the_package_does_not_load_llama_cpp():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import sys, ministruct; print('llama_cpp' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "False"


def run_readme_example(heading: str, capsys, page: Path = README) -> list[str]:
    """Run the first python block after `heading` in `page` (the README, or a docs page);
    the lines it printed."""
    text = page.read_text()
    section = text[text.index(heading) :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, page.name, "exec"), {})
    return capsys.readouterr().out.splitlines()


@pytest.mark.model
def test_readme_library_example_runs(capsys):
    out = run_readme_example("As a library", capsys)
    year, complete = out[0].split()
    assert re.fullmatch(r"[0-9]{4}", year) and complete == "True"


@pytest.mark.model
def test_docs_library_example_runs(capsys):
    out = run_readme_example("# As a library", capsys, LIBRARY)
    year, complete = out[0].split()
    assert re.fullmatch(r"[0-9]{4}", year) and complete == "True"
    assert out[-1] == "True"


@pytest.mark.model
def test_docs_llama_cpp_loop_example_runs(capsys):
    out = run_readme_example("## Inside your own llama-cpp-python loop", capsys, LIBRARY)
    assert out[0].endswith(" stop") and out[-1] == "True", out
