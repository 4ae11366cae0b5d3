"""--help as a first-time user reads it (issue 29): paragraphs re-flowed, values named
(N, X, TEXT), no Python types, nothing cut off at 80 columns."""

from __future__ import annotations

import re

import pytest


def test_top_level_help_reflows_each_commands_summary(run_cli):
    p = run_cli("--help", env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    (line,) = [x for x in p.stdout.splitlines() if " collapse " in x]
    assert "(the reference setting), with the schema shown and withheld over the same seeds, and re-evaluate" in line


@pytest.mark.parametrize("command", ["gen", "check", "convert", "inspect", "bench", "collapse"])
def test_command_help_names_values_not_python_types(run_cli, command):
    p = run_cli(command, "--help", env={"COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    options = [x for x in p.stdout.splitlines() if re.match(r"│ +--", x) and "--help" not in x]
    assert options
    for line in options:
        assert not re.search(r"<(str|bool|int|float|list\[str\])>", line), line
        assert "…" not in line, line


def test_gen_help_shows_both_names_of_the_schema_switch(run_cli):
    out = run_cli("gen", "--help", env={"COLUMNS": "80"}).stdout
    assert "--show-schema" in out and "--withhold-schema" in out
    assert re.search(r"--max-tokens +N ", out)
