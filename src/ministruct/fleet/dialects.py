"""One constraint, one request body per server kind.

Three dialects of the OpenAI-compatible API carry a constraint:

- ``llama`` (llama.cpp's llama-server, llama-cpp-python's server): the GBNF our converter
  prints, in a ``grammar`` field; every sampling setting has a field of its own.
- ``vllm``: ``structured_outputs`` with ``json`` (a schema), ``regex``, ``grammar`` (the
  GBNF our converter prints) or ``choice``; ``repetition_penalty`` for the repeat penalty.
- ``openai``: ``response_format`` ``{"type": "json_schema", "json_schema": {name, schema,
  strict}}``: a schema on the chat endpoint, nothing else.

A tool list goes to a llama server as its compiled grammar (the functions listed in the
user message, as locally); to vllm and openai servers as ``tools``, ``tool_choice`` and
``parallel_tool_calls`` on the chat endpoint (the server's chat template lists them), the
calls coming back in the message's ``tool_calls``.

A setting a kind cannot honour is a `UsageError` naming the parameter when the `Dialect`
is built, before any record is sent. Chat requests go to ``/v1/chat/completions`` (the server applies the
model's chat template); raw ones to ``/v1/completions`` with the prompt as is.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ministruct.decode.sampling import SamplingParams
from ministruct.errors import UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.export import llama_gbnf
from ministruct.jobs.job import user_message
from ministruct.jobs.think import ThinkSettings, announce

KINDS = ("llama", "vllm", "openai")
CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
OPENAI_MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class Settings:
    """What every request of a batch shares besides the constraint and the prompt."""

    params: SamplingParams
    max_tokens: int = 256
    chat: bool = True
    system: str | None = None
    show_schema: bool = True
    top_logprobs: int | None = None  # ask for logprobs with this many alternatives per token
    model: str | None = None  # the served model's name, sent as `model` when known
    think: ThinkSettings | None = None  # free text first: its tags are announced in the user message


@dataclass
class TokenLogprob:
    """One generated token as the server reports it: its bytes, logprob and top alternatives."""

    token: bytes
    logprob: float
    top: list[tuple[bytes, float]]


@dataclass
class Reply:
    """What a server answered for one request."""

    text: str
    finish_reason: str | None
    n_tokens: int
    logprobs: list[TokenLogprob] | None  # None: the server sent none
    tool_calls: list | None = None  # the message's `tool_calls`, when the server returned calls as such


class BadReply(Exception):
    """A 200 answer that is not a completion (no choices, no text)."""


class Dialect:
    """Request bodies for one server kind, one constraint and one batch's settings."""

    def __init__(self, kind: str, constraint: Constraint, settings: Settings) -> None:
        if kind not in KINDS:
            raise UsageError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}", parameter="kind")
        self.kind = kind
        self.constraint = constraint
        self.settings = settings
        self._check()
        self._constraint_fields = self._constraint_part()
        self._sampling_fields = self._sampling_part()

    @property
    def field(self) -> str:
        """The request field that carries the constraint in this dialect."""
        if self.constraint.tools is not None and self.kind != "llama":
            return "tools"
        return {"llama": "grammar", "vllm": "structured_outputs", "openai": "response_format"}[self.kind]

    @property
    def path(self) -> str:
        return CHAT_PATH if self.settings.chat else COMPLETIONS_PATH

    def body(self, prompt: str, *, seed: int, model: str | None = None) -> dict:
        """The JSON body for one prompt (`seed` per record; `model`: the server's own model name,
        used when the settings name none)."""
        s = self.settings
        server_lists_tools = self.constraint.tools is not None and self.kind != "llama"
        if server_lists_tools:
            text = prompt
        else:
            text = user_message(prompt, self.constraint.answer_part, show_schema=s.show_schema)
        if s.think is not None:
            text = announce(text, s.think)
        body: dict = {}
        name = s.model or model
        if name:
            body["model"] = name
        if s.chat:
            messages = [] if s.system is None else [{"role": "system", "content": s.system}]
            body["messages"] = messages + [{"role": "user", "content": text}]
        else:  # as Model.format_prompt does without a chat template
            body["prompt"] = text if s.system is None else f"{s.system}\n\n{text}"
        body.update(self._sampling_fields)
        body["seed"] = seed
        body["stream"] = False
        body.update(self._constraint_fields)
        if s.top_logprobs is not None:
            if s.chat:
                body.update(logprobs=True, top_logprobs=s.top_logprobs)
            else:
                body["logprobs"] = s.top_logprobs
            if self.kind == "llama":
                body["n_probs"] = s.top_logprobs  # llama-server's native name
        return body

    # -- what each kind can carry ------------------------------------------------

    def _check(self) -> None:
        c, s, kind = self.constraint, self.settings, self.kind
        if kind == "openai" and c.boundary is not None:
            raise UsageError(
                "free text before the constraint cannot be sent to a server of kind openai: its response_format "
                "takes a JSON Schema only (use kind llama or vllm, which take the whole grammar)",
                parameter="think",
            )
        if c.tools is not None and kind != "llama" and not s.chat:
            raise UsageError(
                f"a server of kind {kind} takes tools on the chat endpoint only: chat=False cannot be honoured",
                parameter="chat",
            )
        if kind != "openai":
            return
        if c.kind not in ("schema", "tools"):
            raise UsageError(
                f"{c.kind} cannot be sent to a server of kind openai: it takes a JSON Schema (response_format) "
                "or tools only",
                parameter=c.kind,
            )
        if not s.model:
            raise UsageError(
                "model must name the model for a server of kind openai (it serves many)", parameter="model"
            )
        if not s.chat:
            raise UsageError(
                "a server of kind openai takes response_format on the chat endpoint only: "
                "chat=False cannot be honoured",
                parameter="chat",
            )
        if s.params.top_k != 0:
            raise UsageError(
                f"top_k {s.params.top_k}: a server of kind openai has no top-k sampling", parameter="top_k"
            )
        if s.params.repeat_penalty != 1.0:
            raise UsageError(
                f"repeat_penalty {s.params.repeat_penalty}: a server of kind openai has no repeat penalty "
                "(its frequency/presence penalties are other formulas)",
                parameter="repeat_penalty",
            )
        if s.top_logprobs is not None and s.top_logprobs > OPENAI_MAX_TOP_LOGPROBS:
            raise UsageError(
                f"top_logprobs {s.top_logprobs}: a server of kind openai returns at most {OPENAI_MAX_TOP_LOGPROBS}",
                parameter="top_logprobs",
            )

    def _constraint_part(self) -> dict:
        c = self.constraint
        if self.kind == "llama":
            return {"grammar": llama_gbnf(c.grammar)}
        if c.tools is not None:
            return {
                "tools": [t.to_openai() for t in c.tools.tools],
                "tool_choice": c.tools.openai_tool_choice(),
                "parallel_tool_calls": c.tools.parallel,
            }
        if self.kind == "vllm":
            if c.boundary is not None:  # free text first: only the grammar says it all
                return {"structured_outputs": {"grammar": c.grammar.to_gbnf()}}
            if c.kind == "schema":
                return {"structured_outputs": {"json": c.schema}}
            if c.kind == "regex":
                return {"structured_outputs": {"regex": c.text}}
            if c.kind == "choice":
                return {"structured_outputs": {"choice": json.loads(c.text)}}
            return {"structured_outputs": {"grammar": llama_gbnf(c.grammar)}}
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name(c.schema), "schema": c.schema, "strict": True},
            }
        }

    def _sampling_part(self) -> dict:
        p = self.settings.params
        out: dict = {"max_tokens": self.settings.max_tokens, "temperature": p.temperature, "top_p": p.top_p}
        if self.kind == "llama":
            # sent even when off: llama-cpp-python's server defaults are top_k 40,
            # repeat_penalty 1.1 and min_p 0.05, none of which ministruct's sampler applies
            out.update(top_k=p.top_k, repeat_penalty=p.repeat_penalty, min_p=0.0)
        elif self.kind == "vllm":
            if p.top_k:
                out["top_k"] = p.top_k
            if p.repeat_penalty != 1.0:
                out["repetition_penalty"] = p.repeat_penalty
        return out


def schema_name(schema: object) -> str:
    """A response_format name (letters, digits, '_' and '-', at most 64): the schema's title, else 'output'."""
    title = schema.get("title") if isinstance(schema, dict) else None
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", title).strip("_")[:64] if isinstance(title, str) else ""
    return name or "output"


def parse_reply(obj: object, *, chat: bool) -> Reply:
    """The text, finish reason, token count and logprobs of a completion answer."""
    try:
        choice = obj["choices"][0]  # type: ignore[index]
        calls = None
        if chat:
            message = choice.get("message") or {}
            text = message.get("content")
            calls = message.get("tool_calls") or None
            if text is None and isinstance(calls, list):
                text = ""
        else:
            text = choice.get("text")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise BadReply("the answer has no choices") from None
    if not isinstance(text, str):
        raise BadReply("the answer has no text")
    usage = obj.get("usage") if isinstance(obj, dict) else None
    n = usage.get("completion_tokens") if isinstance(usage, dict) else None
    lps = _logprobs(choice.get("logprobs"), chat=chat)
    n_tokens = n if isinstance(n, int) else (len(lps) if lps else 0)
    return Reply(text, choice.get("finish_reason"), n_tokens, lps, calls if isinstance(calls, list) else None)


def _as_bytes(token: object, raw: object) -> bytes:
    if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return bytes(raw)
    return str(token).encode("utf-8", "surrogatepass")


def _logprobs(lp: object, *, chat: bool) -> list[TokenLogprob] | None:
    """Chat's `logprobs.content` or completions' parallel lists, as TokenLogprob; None when absent."""
    if not isinstance(lp, dict):
        return None
    out: list[TokenLogprob] = []
    try:
        if chat:
            content = lp.get("content")
            if not isinstance(content, list):
                return None
            for t in content:
                top = [
                    (_as_bytes(a["token"], a.get("bytes")), float(a["logprob"])) for a in t.get("top_logprobs") or []
                ]
                out.append(TokenLogprob(_as_bytes(t["token"], t.get("bytes")), float(t["logprob"]), top))
        else:
            tokens, lps, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs") or []
            if not isinstance(tokens, list) or not isinstance(lps, list):
                return None
            for i, (tok, logp) in enumerate(zip(tokens, lps)):
                alts = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
                top = [(_as_bytes(k, None), float(v)) for k, v in alts.items()]
                out.append(TokenLogprob(_as_bytes(tok, None), float(logp) if logp is not None else float("-inf"), top))
    except (KeyError, TypeError, ValueError):
        return None
    return out
