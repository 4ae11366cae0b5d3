"""Request bodies per server kind, flag validation, replies, verification: no server needed."""

from __future__ import annotations

import json
import math

import pytest

from fleet.conftest import assert_usage_error
from ministruct.decode.sampling import SamplingParams
from ministruct.errors import UsageError
from ministruct.fleet import Dialect, Settings, Verifier, split_servers
from ministruct.fleet.dialects import TokenLogprob, parse_reply, schema_name
from ministruct.fleet.trace import logprob_steps
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.job import SCHEMA_INSTRUCTION

SCHEMA = {
    "title": "A point!",
    "type": "object",
    "properties": {"x": {"type": "integer"}, "y": {"type": "string", "format": "date"}},
    "required": ["x"],
}


@pytest.fixture
def schema_c(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SCHEMA))
    return load_constraint(schema=str(f))


def settings(**kw) -> Settings:
    params = kw.pop("params", SamplingParams(temperature=0.5, top_p=0.8, top_k=7, repeat_penalty=1.2))
    kw.setdefault("model", "gpt-x")
    return Settings(params, max_tokens=kw.pop("max_tokens", 9), **kw)


def test_llama_sends_our_gbnf_and_every_sampling_field():
    c = load_constraint(regex="[0-9]{2}")
    d = Dialect("llama", c, settings(system="Be brief.", model=None))
    b = d.body("Pick:", seed=11, model="m")
    assert d.path == "/v1/chat/completions" and d.field == "grammar"
    assert b["grammar"] == c.grammar.to_gbnf()
    assert b["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Pick:"}]
    assert (b["temperature"], b["top_p"], b["top_k"], b["repeat_penalty"], b["seed"], b["max_tokens"]) == (
        0.5,
        0.8,
        7,
        1.2,
        11,
        9,
    )
    assert b["min_p"] == 0.0 and b["model"] == "m" and b["stream"] is False
    assert "structured_outputs" not in b and "response_format" not in b


def test_llama_sends_off_values_the_server_would_otherwise_default():
    b = Dialect("llama", load_constraint(regex="a"), settings(params=SamplingParams())).body("p", seed=0)
    assert (b["top_k"], b["repeat_penalty"]) == (0, 1.0)


@pytest.mark.parametrize(
    "flags, key, value",
    [
        ({"regex": "[a-c]+x"}, "regex", "[a-c]+x"),
        ({"choice": ["yes", "no"]}, "choice", ["yes", "no"]),
        ({"grammar": "digits"}, "grammar", None),
    ],
)
def test_vllm_structured_outputs_per_constraint(flags, key, value):
    c = load_constraint(**flags)
    b = Dialect("vllm", c, settings()).body("p", seed=1)
    assert list(b["structured_outputs"]) == [key]
    assert b["structured_outputs"][key] == (value if value is not None else c.grammar.to_gbnf())
    assert b["repetition_penalty"] == 1.2 and b["top_k"] == 7 and "repeat_penalty" not in b and "grammar" not in b


def test_vllm_schema_is_the_original_schema_and_the_prompt_carries_it(schema_c):
    b = Dialect("vllm", schema_c, settings(chat=False)).body("Give a point.", seed=1)
    assert b["structured_outputs"] == {"json": SCHEMA}
    assert "messages" not in b and b["prompt"].startswith(SCHEMA_INSTRUCTION + "\n")
    assert b["prompt"].endswith("\n\nGive a point.")
    assert json.loads(b["prompt"].split("\n")[1]) == SCHEMA
    plain = Dialect("vllm", schema_c, settings(show_schema=False)).body("Give a point.", seed=1)
    assert plain["messages"][-1]["content"] == "Give a point."


def test_vllm_leaves_off_values_out():
    b = Dialect("vllm", load_constraint(regex="a"), settings(params=SamplingParams())).body("p", seed=0)
    assert "top_k" not in b and "repetition_penalty" not in b


def test_openai_response_format(schema_c):
    b = Dialect("openai", schema_c, settings(params=SamplingParams(temperature=0.2))).body("p", seed=3, model="listed")
    assert b["model"] == "gpt-x"  # the model the user named wins over the server's list
    assert b["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "A_point", "schema": SCHEMA, "strict": True},
    }
    assert "top_k" not in b and "repeat_penalty" not in b and "grammar" not in b


@pytest.mark.parametrize(
    "kw, param",
    [
        ({"params": SamplingParams(top_k=5)}, "top_k"),
        ({"params": SamplingParams(repeat_penalty=1.1)}, "repeat_penalty"),
        ({"params": SamplingParams(), "chat": False}, "chat"),
        ({"params": SamplingParams(), "top_logprobs": 21}, "top_logprobs"),
        ({"params": SamplingParams(), "model": None}, "model"),
    ],
)
def test_openai_refuses_what_it_cannot_honour(schema_c, kw, param):
    with pytest.raises(UsageError) as e:
        Dialect("openai", schema_c, settings(**kw))
    assert e.value.parameter == param and param in str(e.value)


@pytest.mark.parametrize("flags", [{"regex": "a+"}, {"choice": ["a"]}, {"grammar": "digits"}])
def test_openai_takes_a_schema_only(flags):
    with pytest.raises(UsageError) as e:
        Dialect("openai", load_constraint(**flags), settings(params=SamplingParams()))
    assert e.value.parameter == next(iter(flags))


def test_unknown_kind():
    with pytest.raises(UsageError) as e:
        Dialect("tgi", load_constraint(regex="a"), settings())
    assert e.value.parameter == "kind" and str(e.value).startswith("kind must be one of llama, vllm, openai")


def test_logprob_fields_per_endpoint():
    c = load_constraint(regex="a")
    chat = Dialect("llama", c, settings(top_logprobs=5)).body("p", seed=0)
    raw = Dialect("vllm", c, settings(top_logprobs=5, chat=False)).body("p", seed=0)
    assert (chat["logprobs"], chat["top_logprobs"], chat["n_probs"]) == (True, 5, 5)
    assert raw["logprobs"] == 5 and "top_logprobs" not in raw and "n_probs" not in raw


def test_schema_name():
    assert schema_name({"title": "x" * 80}) == "x" * 64
    assert schema_name({"title": "!!"}) == schema_name(True) == "output"


def test_parse_chat_and_completion_replies():
    chat = {
        "choices": [
            {
                "message": {"content": "42"},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [
                        {
                            "token": "4",
                            "logprob": -0.5,
                            "bytes": [52],
                            "top_logprobs": [{"token": "4", "logprob": -0.5}, {"token": "x", "logprob": -1.0}],
                        },
                        {"token": "2", "logprob": -0.1, "top_logprobs": []},
                    ]
                },
            }
        ],
        "usage": {"completion_tokens": 2},
    }
    r = parse_reply(chat, chat=True)
    assert (r.text, r.finish_reason, r.n_tokens) == ("42", "stop", 2)
    assert [t.token for t in r.logprobs] == [b"4", b"2"] and r.logprobs[0].top == [(b"4", -0.5), (b"x", -1.0)]
    comp = {
        "choices": [
            {
                "text": "ab",
                "finish_reason": "length",
                "logprobs": {
                    "tokens": ["a", "b"],
                    "token_logprobs": [-1.0, -2.0],
                    "top_logprobs": [{"a": -1.0}, {"b": -2.0, "c": -0.5}],
                },
            }
        ]
    }
    r = parse_reply(comp, chat=False)
    assert (r.text, r.n_tokens, r.logprobs[1].top) == ("ab", 2, [(b"b", -2.0), (b"c", -0.5)])
    assert parse_reply({"choices": [{"message": {"content": "x"}}]}, chat=True).logprobs is None


def test_a_reply_without_text_is_a_bad_reply():
    from ministruct.fleet.dialects import BadReply

    for obj in ({}, {"choices": []}, {"choices": [{"message": {"content": None}}]}, [1]):
        with pytest.raises(BadReply):
            parse_reply(obj, chat=True)


def test_split_servers():
    assert split_servers(["http://a:1/, http://b:2/v1", "http://a:1"]) == ["http://a:1", "http://b:2"]
    assert split_servers("http://a:1  https://c") == ["http://a:1", "https://c"]
    with pytest.raises(UsageError) as e:
        split_servers(["ftp://x"])
    assert e.value.parameter == "server"


def test_schema_verdict_any_whitespace_and_key_order(schema_c):
    v = Verifier(schema_c)
    ok = v('{ "y" : "2024-02-29",\n  "x": 3 }')
    assert ok.ok and ok.value == {"x": 3, "y": "2024-02-29"} and ok.fields() == {"verified": True}
    bad = v('{"x": 3, "y": "2023-02-29"}')  # the format checker knows 2023 is no leap year
    assert not bad.ok and bad.position == {"pointer": "/y", "keyword": "format"}
    missing = v('{"y": "2024-01-01"}')
    assert (
        missing.position == {"pointer": "/", "keyword": "required"} and '"x" is a required property' in missing.message
    )
    notjson = v('{"x": 3')
    f = notjson.fields()
    assert f["verified"] is False and f["check_position"]["offset"] == 7 and f["check_expected"] == ["JSON"]


def test_exact_match_verdict_names_position_and_expectation():
    v = Verifier(load_constraint(regex="[0-9]{2}"))
    assert v("42").ok
    r = v("4x")
    assert r.position == {"line": 1, "column": 2, "offset": 1} and r.expected == ["[0-9]"]
    assert "unexpected 'x'" in r.message
    assert not v("421").ok and not v("4").ok


def test_looks_unconstrained(schema_c):
    v = Verifier(load_constraint(regex="[0-9]{2}"))
    assert v.looks_unconstrained("4", "length") is None  # cut short, but a prefix
    assert v.looks_unconstrained("To pick", "length")
    s = Verifier(schema_c)
    assert s.looks_unconstrained('{"x": 1', "length") is None
    assert s.looks_unconstrained("Sure, here", "length")
    assert s.looks_unconstrained('{"x": 1', "stop")


def test_logprob_steps_legal_mass_is_a_lower_bound():
    c = load_constraint(regex="[0-9]{2}")
    toks = [
        TokenLogprob(
            b"4",
            math.log(0.1),
            [(b"The", math.log(0.5)), (b"4", math.log(0.1)), (b"42", math.log(0.2)), (b"4", math.log(0.1))],
        ),
        TokenLogprob(b"2", math.log(0.3), [(b"2", math.log(0.3)), (b"", math.log(0.4)), (b"23", math.log(0.1))]),
        TokenLogprob(b"", math.log(0.9), [(b"", math.log(0.9)), (b"1", math.log(0.05))]),
    ]
    steps = logprob_steps(c, toks)
    assert [s["legal_top"] for s in steps] == [2, 1, 1]
    assert steps[0]["Z_lower"] == pytest.approx(0.3) and steps[0]["top_n"] == 3  # "4" counted once
    assert steps[1]["Z_lower"] == pytest.approx(0.3)  # end of text not legal after one digit; "23" too long
    assert steps[2]["Z_lower"] == pytest.approx(0.9) and steps[0]["p"] == pytest.approx(0.1)
    off = logprob_steps(c, [TokenLogprob(b"x", -1.0, [(b"x", -1.0)]), TokenLogprob(b"1", -1.0, [(b"1", -1.0)])])
    assert off[0]["Z_lower"] == 0.0 and off[1]["Z_lower"] is None


def test_cli_flag_errors_name_flags(run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    url = "http://127.0.0.1:9"  # never contacted: the settings are refused first
    openai = ("--server", url, "--server-kind", "openai", "--model", "gpt-x")
    assert_usage_error(run_cli("gen", "--regex", "a", "p", *openai), "--regex", "openai")
    assert_usage_error(run_cli("gen", "--schema", str(schema), "p", *openai, "--top-k", "4"), "--top-k 4")
    assert_usage_error(run_cli("gen", "--schema", str(schema), "p", *openai, "--raw"), "--raw")
    assert_usage_error(run_cli("gen", "--schema", str(schema), "p", *openai[:4]), "--model")
    assert_usage_error(
        run_cli("gen", "--regex", "a", "p", "--server", url, "--server-kind", "tgi"), "--server-kind must be one of"
    )
    assert_usage_error(run_cli("gen", "--regex", "a", "p", "--server-kind", "vllm"), "need --server URL")
    assert_usage_error(run_cli("gen", "--regex", "a", "p", "--server", "localhost:8080"), "not an http")
    assert_usage_error(
        run_cli(
            "gen",
            "--regex",
            "a",
            "p",
            "--server",
            url,
            "--server-kind",
            "llama",
            "--trace",
            str(tmp_path / "t"),
            "--trace-legal",
        ),
        "--trace-legal",
    )
