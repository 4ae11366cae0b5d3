"""Every output a server returns, checked by our own engine against the original constraint.

- schema: is the text a valid instance? (`instance.InstanceChecker`, `check --schema`'s
  answer: JSON parse, then `jsonschema`'s validator, Draft 2020-12 unless `$schema` names
  another, here with its format checker since our own grammar enforces formats: whatever
  whitespace and key order the server's grammar allowed.) A rejection names the JSON
  pointer and keyword, or where the JSON syntax breaks.
- regex, GBNF grammar, choice: an exact match of the whole text (`engine.check.check_text`).
  A rejection names line, column, byte offset and what was expected there.
- tools: every call names an allowed tool and its arguments are a valid instance of the
  tool's `parameters` (`check.tool_calls.ToolCallChecker`): the calls read from the text in
  the tool format, or the `tool_calls` an OpenAI-style server returned.

`looks_unconstrained` tells a server that ignored the constraint from one that was merely
cut short: a constrained server can only ever return a prefix of the language.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ministruct.check.grammar import check_text
from ministruct.check.instance import InstanceChecker
from ministruct.check.tool_calls import ToolCallChecker
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.think import split_free_text

# first characters a JSON text can start with (after whitespace)
_JSON_STARTS = set('{["-0123456789tfn')


@dataclass
class Verdict:
    """Our check of one output: accepted or not, and where and why not."""

    ok: bool
    message: str | None = None
    position: dict[str, Any] | None = None  # {line, column, offset} or {pointer, keyword}
    expected: list[str] = field(default_factory=list)
    value: Any = None  # the parsed JSON, for a schema
    has_value: bool = False
    reasoning: str | None = None  # with free text first: the thinking (`answer` holds the rest)
    answer: str | None = None

    def fields(self) -> dict[str, Any]:
        """The result-record fields: `verified`, and on a rejection `check_error`, `check_position`,
        `check_expected`."""
        if self.ok:
            return {"verified": True}
        return {
            "verified": False,
            "check_error": self.message,
            "check_position": self.position,
            "check_expected": self.expected,
        }


class Verifier:
    """Checks outputs against one constraint (a schema's validator is built once)."""

    def __init__(self, constraint: Constraint) -> None:
        self.constraint = constraint
        self._instance: InstanceChecker | None = None
        self._answer: Verifier | None = None
        self._tools: ToolCallChecker | None = None
        if constraint.boundary is not None:  # free text first: the answer after CLOSE is verified
            self._answer = Verifier(constraint.answer_part)
        elif constraint.kind == "schema":
            self._instance = InstanceChecker(constraint.schema, source=constraint.source)
        if constraint.tools is not None:
            self._tools = ToolCallChecker(constraint.tools, source=constraint.source)

    def __call__(self, text: str, tool_calls: list | None = None) -> Verdict:
        """The verdict on one output (`tool_calls`: the calls a server returned as such)."""
        if self._answer is not None:
            return self._after_close(text)
        if self._instance is not None:
            return self._schema(text)
        if self._tools is not None:
            res = self._tools.check(text) if tool_calls is None else self._tools.check_calls(tool_calls)
            if res.accepted:
                return Verdict(True)
            pos = {"pointer": res.pointer, "keyword": res.keyword}
            return Verdict(False, res.message(), pos, [f"a call satisfying {res.keyword}"])
        res = check_text(self.constraint.grammar, text)
        if res.accepted:
            return Verdict(True)
        return Verdict(
            False,
            res.message(),
            {"line": res.line, "column": res.column, "offset": res.offset},
            list(res.expected),
        )

    def _after_close(self, text: str) -> Verdict:
        b = self.constraint.boundary
        assert b is not None and self._answer is not None
        parts = split_free_text(b, text)
        if parts is None:
            return Verdict(
                False,
                f"the thinking never ends: no {b.close_text!r} in the text",
                {"line": text.count("\n") + 1, "column": len(text) - text.rfind("\n"), "offset": len(text.encode())},
                [repr(b.close_text)],
                reasoning=text,
                answer="",
            )
        reasoning, answer = parts
        v = self._answer(answer)
        if not v.ok and v.message is not None:
            v.message = f"in the answer after {b.close_text!r}: {v.message}"
        v.reasoning, v.answer = reasoning, answer
        return v

    def _schema(self, text: str) -> Verdict:
        res = self._instance.check(text)  # type: ignore[union-attr]
        if res.accepted:
            return Verdict(True, value=json.loads(text), has_value=True)
        if res.pointer is not None:
            pos = {"pointer": res.pointer, "keyword": res.keyword}
            return Verdict(False, res.message(), pos, [f"a value satisfying {res.keyword}"])
        pos = {"line": res.line, "column": res.column, "offset": res.offset}
        return Verdict(False, f"not JSON: {res.message()}", pos, ["JSON"])

    def looks_unconstrained(self, text: str, finish_reason: str | None) -> str | None:
        """Why a rejected output cannot have come from a server that enforced the constraint, or None.

        For regex, grammar and choice: the text is not even a prefix of the language. For a
        schema: the text is not JSON at all (it does not start like JSON, or the server
        stopped by itself on something that does not parse).
        """
        if self._instance is None:  # (free text first: the whole grammar, thinking and answer)
            if check_text(self.constraint.grammar, text, prefix=True).accepted:
                return None
            return "not even a prefix of the constraint's language"
        stripped = text.lstrip()
        if not stripped or stripped[0] not in _JSON_STARTS:
            return f"not JSON at all{' (cut at max_tokens)' if finish_reason == 'length' else ''}"
        if finish_reason != "length":
            try:
                json.loads(text)
            except ValueError:
                return "not JSON, though the server stopped by itself"
        return None
