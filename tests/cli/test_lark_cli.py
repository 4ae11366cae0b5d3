"""`--lark FILE|-` on the command line, `convert --to lark`, batch records' `lark` field."""

from __future__ import annotations

import json

from cli.conftest import assert_one_line_error

GRAMMAR = '%import common.INT\n%ignore " "\nstart: "sum(" INT ("," INT)* ")"\n'


def test_check_with_a_lark_file_and_stdin(run_cli, tmp_path):
    path = tmp_path / "sum.lark"
    path.write_text(GRAMMAR)
    assert run_cli("check", "--lark", str(path), "sum(1, 22 )").returncode == 0
    bad = run_cli("check", "--lark", str(path), "sum(1,,2)")
    assert bad.returncode == 1
    assert run_cli("check", "--lark", "-", "sum(3)", input=GRAMMAR).returncode == 0


def test_lark_errors_are_one_line_with_the_place(run_cli, tmp_path):
    path = tmp_path / "bad.lark"
    path.write_text("start: foo\nfoo[max_tokens=3]: /a/\n")
    p = run_cli("check", "--lark", str(path), "a")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert f"{path}:2:5" in p.stderr and "max_tokens" in p.stderr and "^" in p.stderr
    assert_one_line_error(run_cli("check", "--lark", str(tmp_path / "none.lark"), "a"), "no such Lark grammar")


def test_convert_to_lark_from_every_front_end(run_cli, tmp_path):
    lark = tmp_path / "out.lark"
    for args, good, bad in (
        (("--grammar", "json"), '{"a": [1, true]}', '{"a": }'),
        (("--regex", "[a-z]+@[a-z]+\\.(com|org)"), "me@x.org", "me@x.net"),
        (("--choice", "yes", "--choice", 'say "no"'), 'say "no"', "say no"),
        (("--schema", str(_schema(tmp_path))), '{"n": 3}', '{"n": "3"}'),
        (("--lark", str(_write(tmp_path / "g.lark", GRAMMAR))), "sum(1, 2)", "sum()"),
    ):
        p = run_cli("convert", *args, "--to", "lark")
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("start: ")
        lark.write_text(p.stdout)
        assert run_cli("check", "--lark", str(lark), good).returncode == 0, (args, p.stdout)
        assert run_cli("check", "--lark", str(lark), bad).returncode == 1, (args, p.stdout)


def test_batch_records_carry_lark(run_cli, tmp_path):
    g = _write(tmp_path / "ab.lark", 'start: "a"+ "b"\n')
    lines = [
        json.dumps({"id": "1", "text": "aab", "lark": str(g)}),
        json.dumps({"id": "2", "text": "ba", "lark": str(g)}),
        json.dumps({"id": "3", "text": "x", "lark": 5}),
    ]
    inp = _write(tmp_path / "in.jsonl", "\n".join(lines) + "\n")
    p = run_cli("check", "--choice", "x", "--input", str(inp))
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(r["id"], r["accepted"]) for r in recs] == [("1", True), ("2", False), ("3", None)]
    assert '"lark" must be a string' in recs[2]["error"]


def _write(path, text):
    path.write_text(text)
    return path


def _schema(tmp_path):
    return _write(tmp_path / "s.json", json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}))


def test_check_with_a_lazy_trigger(run_cli, tmp_path):
    path = _write(
        tmp_path / "calls.lark", 'start: head INT "</t>"\nhead[lazy]: TEXT "<t>"\nTEXT: /(.|\\n)*/\nINT: /[0-9]+/\n'
    )
    assert run_cli("check", "--lark", str(path), "so: <t>42</t>").returncode == 0
    bad = run_cli("check", "--lark", str(path), "a <t> b <t>42</t>")  # the free text ends at the first <t>
    assert bad.returncode == 1 and "line 1, column 6" in bad.stdout + bad.stderr


def test_a_json_block_has_llguidances_flexible_whitespace_unless_told(run_cli, tmp_path):
    # llguidance's own example of a %json block (docs/syntax.md) accepts `{"name":"get_weather", "parameters": ...}`
    path = _write(
        tmp_path / "call.lark",
        'start: TEXT | call\nTEXT: /[^{](.|\\n)*/\ncall: %json {"type": "object", "properties": {"name": {"const": "w"}, '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}, '
        '"required": ["name", "parameters"]}\n',
    )
    spaced = '{"name":"w", "parameters": {"city":"Seattle"}}'
    assert run_cli("check", "--lark", str(path), spaced).returncode == 0
    assert run_cli("check", "--lark", str(path), "--whitespace", "compact", spaced).returncode == 1
    assert (
        run_cli(
            "check", "--lark", str(path), "--whitespace", "compact", spaced.replace(", ", ",").replace(": ", ":")
        ).returncode
        == 0
    )
    # (a schema's own default stays json.dumps' layout: one space after `:` and `,`)
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}}')
    assert run_cli("check", "--schema", str(schema), "--as-generated", '{"a": 1}').returncode == 0
    assert run_cli("check", "--schema", str(schema), "--as-generated", '{"a":  1}').returncode == 1


SQL = 'start: "SELECT" NAME [NAME] "FROM" NAME\nNAME: /[a-z]+/i\n%import common.WS\n%ignore WS\n'


def test_lark_lexer_picks_the_reading(run_cli, tmp_path):
    path = _write(tmp_path / "sql.lark", SQL)
    glued = "SELECT aFROMb"  # greedy (the default): one name after SELECT, and no FROM
    assert run_cli("check", "--lark", str(path), glued).returncode == 1
    assert run_cli("check", "--lark", str(path), "--lark-lexer", "greedy", glued).returncode == 1
    assert run_cli("check", "--lark", str(path), "--lark-lexer", "cfl", glued).returncode == 0
    assert_one_line_error(run_cli("check", "--lark", str(path), "--lark-lexer", "lalr", "x"), "--lark-lexer")
    assert_one_line_error(run_cli("check", "--regex", "a", "--lark-lexer", "cfl", "a"), "--lark-lexer")


def test_convert_of_a_greedy_grammar_to_gbnf_says_why_not(run_cli, tmp_path):
    path = _write(tmp_path / "sql.lark", SQL)
    assert_one_line_error(run_cli("convert", "--lark", str(path), "--to", "gbnf"), "--lark-lexer cfl")
    p = run_cli("convert", "--lark", str(path), "--lark-lexer", "cfl", "--to", "gbnf")
    assert p.returncode == 0 and "root ::=" in p.stdout
    back = run_cli("convert", "--lark", str(path), "--to", "lark")  # greedy, printed as it reads
    assert back.returncode == 0 and "%ignore" in back.stdout
    again = _write(tmp_path / "again.lark", back.stdout)
    for text, code in (("SELECT a FROM b", 0), ("SELECT aFROMb", 1), ("SELECT a b FROM c", 0)):
        assert run_cli("check", "--lark", str(again), text).returncode == code, text


def test_gen_on_a_greedy_grammar_closes_within_max_tokens(run_cli, tmp_path):
    """The budget on greedy lexemes: output that can close within --max-tokens does, and
    reads back through `check` (a completion may need a separator byte now)."""
    from pathlib import Path

    sql = Path(__file__).resolve().parents[2] / "benchmarks" / "grammars" / "sql_select.lark"
    for seed, n in (("1", "12"), ("2", "13"), ("3", "16")):  # (12: the least the bound says, as --lark-lexer cfl)
        p = run_cli(
            "gen", "--lark", str(sql), "Write a SQL query:", "--max-tokens", n, "--seed", seed,
            "--temperature", "1.0", "--format", "jsonl", "--raw", "--quiet",
        )  # fmt: skip
        rec = json.loads(p.stdout)
        assert p.returncode == 0 and rec["complete"] and rec["n_tokens"] <= int(n), rec
        assert run_cli("check", "--lark", str(sql), rec["output"]).returncode == 0, rec["output"]
