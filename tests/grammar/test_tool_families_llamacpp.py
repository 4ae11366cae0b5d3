"""Each family's grammar as the fleet sends it (GBNF, `grammar.export.llama_gbnf`) is one
llama.cpp takes, with the same language: llama.cpp's grammar sampler (a child process,
tests/llamacpp_grammar_child.py) accepts the suite templates' own rendering of a call and
gives ministruct's verdict on its mutations."""

from __future__ import annotations

import pytest

from grammar.chat_templates import WEATHER, calls_span, render, template_names, template_text
from grammar.test_gbnf_export_llamacpp import LlamaCpp
from grammar.test_tool_families import EXPECTED
from ministruct.check.grammar import check_text
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.export import llama_gbnf
from ministruct.grammar.tool_families import detect_family

RENDERING = [n for n in template_names() if EXPECTED.get(n)]


@pytest.fixture(scope="module")
def llama():
    child = LlamaCpp()
    yield child
    child.close()


@pytest.mark.parametrize("name", RENDERING)
def test_the_gbnf_sent_to_llama_servers_has_the_familys_language(llama, name):
    fam = detect_family(template_text(name)).family
    c = Constraint.from_tools([WEATHER], choice="required", format=fam.name)
    span = calls_span(name, render(name, [("get_weather", {"city": "Paris"})], [WEATHER]), fam.prompt_header)
    texts = [span, span[:-1], span.replace("get_weather", "get_wether"), span.replace("Paris", "Pa\nris", 1)]
    got = llama.verdicts(llama_gbnf(c.grammar), texts)
    assert got is not None, "llama.cpp crashed on the grammar"
    parsed, accepts = got
    assert parsed
    ours = [check_text(c.grammar, t).accepted for t in texts]
    assert ours[0] and not ours[1] and not ours[2]
    assert accepts == ours, list(zip(texts, accepts, ours))
