"""The front ends' Lark parsers loaded from the cache folder: the same table as Lark's own
construction, the same grammars parsed, and a damaged or foreign file rebuilt."""

from __future__ import annotations

import hashlib

import pytest

from ministruct.grammar.export import llama_gbnf
from ministruct.grammar.gbnf import parse as gbnf_parse
from ministruct.grammar.lark import syntax as lark_syntax
from ministruct.grammar.parser_cache import lalr_parser
from ministruct.grammar.regex import parse as regex_parse

FRONT_ENDS = {"regex": regex_parse, "gbnf": gbnf_parse, "lark": lark_syntax}
REGEXES = [r"[0-9]{4}", r"(a|bc)*d?", r"[^\n]{2,5}x", r"\d+(\.\d+)?(e[+-]?\d+)?"]
GBNFS = [
    'root ::= "a" [0-9]+ ( "," root )?',
    'root ::= item{2,3}\nitem ::= [a-z] | "\\x41"',
]
LARKS = ['start: "x" NUM\nNUM: /[0-9]+/', 'start: a | b\na: "p"+\nb: %json {"type": "integer"}']


def _lark_of(name: str):
    built = FRONT_ENDS[name]._parser()
    return built[0] if isinstance(built, tuple) else built


def _fresh(name: str, monkeypatch: pytest.MonkeyPatch, folder) -> object:
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(folder))
    monkeypatch.delenv("MINISTRUCT_NO_CACHE", raising=False)
    FRONT_ENDS[name]._parser.cache_clear()
    return _lark_of(name)


def _table(lark) -> tuple:
    t = lark.parser.parser.parser.parse_table
    return t.states, t.start_states, t.end_states


def _parse_all() -> list[str]:
    from ministruct.grammar.constraint import Constraint

    out = [llama_gbnf(regex_parse.parse_regex(r)) for r in REGEXES]
    out += [llama_gbnf(gbnf_parse.parse_gbnf(g)) for g in GBNFS]
    out += [llama_gbnf(Constraint.from_lark(t).grammar) for t in LARKS]
    return out


@pytest.mark.parametrize("name", sorted(FRONT_ENDS))
def test_a_stored_table_loads_as_lark_builds_it(name, tmp_path, monkeypatch):
    built = _fresh(name, monkeypatch, tmp_path)  # nothing stored yet: Lark builds, and it is stored
    stored = list((tmp_path / "lark").glob("*.json"))
    assert len(stored) == 1
    loaded = _fresh(name, monkeypatch, tmp_path)
    assert built.source_path == "<string>" and loaded.source_path == "<deserialized>"  # built, then loaded
    assert _table(loaded) == _table(built)
    assert loaded.options.lexer is built.options.lexer
    FRONT_ENDS[name]._parser.cache_clear()


def test_loaded_parsers_parse_as_built_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_NO_CACHE", "1")
    for module in FRONT_ENDS.values():
        module._parser.cache_clear()
    built = _parse_all()
    monkeypatch.delenv("MINISTRUCT_NO_CACHE")
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    for _ in range(2):  # the first round stores the tables, the second loads them
        for module in FRONT_ENDS.values():
            module._parser.cache_clear()
        assert _parse_all() == built
        assert all(_lark_of(name).source_path == "<deserialized>" for name in FRONT_ENDS) == (_ == 1)
    assert len(list((tmp_path / "lark").glob("*.json"))) == 3
    for module in FRONT_ENDS.values():
        module._parser.cache_clear()


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign"])
def test_a_damaged_file_is_rebuilt_and_replaced(damage, tmp_path, monkeypatch):
    built = _fresh("regex", monkeypatch, tmp_path)
    expected = [llama_gbnf(regex_parse.parse_regex(r)) for r in REGEXES]
    (path,) = (tmp_path / "lark").glob("*.json")
    raw = path.read_bytes()
    if damage == "flip":
        i = len(raw) // 2
        path.write_bytes(raw[:i] + bytes([raw[i] ^ 0x01]) + raw[i + 1 :])
    elif damage == "truncate":
        path.write_bytes(raw[: len(raw) // 3])
    else:
        path.write_bytes(b"not a table\n{}")
    again = _fresh("regex", monkeypatch, tmp_path)  # Lark builds it again (its state numbers may differ)
    assert again is not built
    digest, body = path.read_bytes().split(b"\n", 1)  # and it is stored again, whole
    assert digest == hashlib.sha256(body).hexdigest().encode()
    assert _table(_fresh("regex", monkeypatch, tmp_path)) == _table(again)
    assert [llama_gbnf(regex_parse.parse_regex(r)) for r in REGEXES] == expected
    regex_parse._parser.cache_clear()


def test_no_cache_stores_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINISTRUCT_NO_CACHE", "1")
    parser = lalr_parser('start: "a" "b"', lexer=regex_parse._TokenList)
    assert parser.options.parser == "lalr"
    assert not (tmp_path / "lark").exists()
