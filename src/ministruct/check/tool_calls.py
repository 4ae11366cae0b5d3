"""Are the tool calls of an answer valid? Each call names an allowed tool, and its
arguments are a valid instance of that tool's `parameters` (the `jsonschema` validator,
as `check --schema` asks), whatever their key order and whitespace.

Two readings: `check(text)` reads the calls from an answer in the spec's format
(`grammar.tools.read_calls`); `check_calls(calls)` takes calls in OpenAI's `tool_calls`
shape (`function.arguments` a JSON string), as an OpenAI-style server returns them.
A rejection names the call (`/tool_calls/0`) and, for an argument, its JSON pointer.
"""

from __future__ import annotations

from typing import Any

from ministruct.check.instance import InstanceChecker
from ministruct.check.result import CheckResult
from ministruct.grammar.json_text import parse_json
from ministruct.grammar.tools import ToolSpec, read_calls


class ToolCallChecker:
    """One validator per tool, built once; checks answers or OpenAI `tool_calls` lists."""

    def __init__(self, spec: ToolSpec, *, source: str = "<tools>") -> None:
        self.spec = spec
        self._checkers = {t.name: InstanceChecker(t.parameters, source=f"{source}: tool {t.name}") for t in spec.tools}

    def check(self, text: str) -> CheckResult:
        """The calls of an answer in the spec's format: readable, allowed, valid arguments."""
        read = read_calls(self.spec, text)
        if read.error is not None:
            return CheckResult(False, pointer="/tool_calls", keyword="format", reason=read.error)
        return self._all([(c.name, c.arguments) for c in read.calls])

    def check_calls(self, tool_calls: Any) -> CheckResult:
        """Calls in OpenAI's shape; `arguments` must be a JSON text of an object."""
        if not isinstance(tool_calls, list):
            return CheckResult(False, pointer="/tool_calls", keyword="type", reason="tool_calls is not a list")
        calls: list[tuple[str, Any]] = []
        for i, tc in enumerate(tool_calls):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                return CheckResult(False, pointer=f"/tool_calls/{i}", keyword="function", reason="no function name")
            try:
                args = parse_json(fn.get("arguments") or "null")
            except (TypeError, ValueError) as e:
                return CheckResult(
                    False, pointer=f"/tool_calls/{i}/function/arguments", keyword="json", reason=f"not JSON: {e}"
                )
            calls.append((fn["name"], args))
        return self._all(calls)

    def _all(self, calls: list[tuple[str, Any]]) -> CheckResult:
        allowed = {t.name for t in self.spec.allowed}
        if self.spec.choice not in ("auto", "none") and not calls:
            return CheckResult(False, pointer="/tool_calls", keyword="tool_choice", reason="no call")
        if self.spec.choice == "none" and calls:
            return CheckResult(
                False, pointer="/tool_calls", keyword="tool_choice", reason="a call with tool_choice none"
            )
        if len(calls) > 1 and not self.spec.parallel:
            return CheckResult(
                False, pointer="/tool_calls/1", keyword="parallel_tool_calls", reason="several calls, parallel off"
            )
        for i, (name, args) in enumerate(calls):
            if name not in allowed:
                return CheckResult(
                    False, pointer=f"/tool_calls/{i}/function/name", keyword="tool_choice", reason=f"{name} not allowed"
                )
            res = self._checkers[name].check_value(args)
            if not res.accepted:
                ptr = f"/tool_calls/{i}/function/arguments{res.pointer if res.pointer != '/' else ''}"
                return CheckResult(False, pointer=ptr, keyword=res.keyword, reason=res.reason)
        return CheckResult(True)
