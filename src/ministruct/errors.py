"""Every error ministruct raises derives from MinistructError.

Errors speak of the library's parameters (`temperature`, `max_tokens`, ...); the CLI
maps them to its flags and exit codes in one table (cli/errors.py). Errors about bad
arguments or bad input text are also ValueErrors. Each renders as one line (plus, for
syntax errors, the offending line and a caret).
"""

from __future__ import annotations

from typing import Sequence


class MinistructError(Exception):
    """Root of ministruct's exceptions."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(MinistructError, ValueError):
    """A bad argument (a value out of range, two constraints, ...); `parameter` names it."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class InputError(MinistructError):
    """An input file or record that cannot be read."""

    @classmethod
    def unreadable(cls, path: str, what: str, e: OSError) -> "InputError":
        """The error for a `what` file ("input", "schema", ...) at `path` that failed to open or read."""
        if isinstance(e, FileNotFoundError):
            return cls(f"{path}: no such {what} file")
        if isinstance(e, IsADirectoryError):
            return cls(f"{path}: is a directory, not {_article(what)} {what} file")
        return cls(f"{path}: cannot read {what} file: {e.strerror or e}")


class OutputError(MinistructError):
    """An output (stdout, a trace or report file) that cannot be written: a full disk, an I/O error."""


class OutputClosed(MinistructError):
    """The reader of stdout went away (`| head -1`): a quiet end, exit 0, as other Unix tools."""

    exit_code = 0


class GrammarSyntaxError(MinistructError, ValueError):
    """A grammar or regex that does not parse; knows where and what was expected."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "<grammar>",
        text: str | None = None,
        line: int | None = None,
        column: int | None = None,
        expected: Sequence[str] = (),
    ) -> None:
        self.source = source
        self.text = text
        self.line = line
        self.column = column
        self.expected = tuple(expected)
        self.reason = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        msg = f"{where}: {self.reason}"
        if self.expected:
            msg += "; expected " + ", ".join(self.expected)
        return msg

    def excerpt(self) -> str:
        """The offending line with a caret under the column ('' when unknown)."""
        if self.text is None or self.line is None:
            return ""
        lines = self.text.splitlines() or [""]
        if not 1 <= self.line <= len(lines):
            return ""
        src = lines[self.line - 1]
        col = max(1, self.column or 1)
        return f"  {src}\n  {' ' * (col - 1)}^"


class GrammarError(MinistructError, ValueError):
    """A grammar that parses but is not usable (undefined rule, left recursion, ...)."""

    def __init__(self, message: str, *, source: str = "<grammar>", rule: str | None = None) -> None:
        self.source = source
        self.rule = rule
        super().__init__(f"{source}: {message}")


class SchemaError(MinistructError, ValueError):
    """A JSON Schema that cannot be enforced exactly; names the JSON pointer and keyword."""

    def __init__(
        self, message: str, *, pointer: str = "", keyword: str | None = None, source: str = "<schema>"
    ) -> None:
        self.pointer = pointer
        self.keyword = keyword
        self.source = source
        self.reason = message
        super().__init__(f"{source}: at {pointer or '/'}: {message}" if pointer is not None else message)


class CompileLimitError(MinistructError):
    """Compiling or stepping a grammar would pass a time or memory bound."""


class NoLegalContinuation(MinistructError):
    """The legal set is empty at some step: no token can extend the output."""

    def __init__(self, step: int, output: bytes | str = b"") -> None:
        self.step = step
        self.output = output
        text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
        super().__init__(f"no legal continuation at step {step} after {text!r}")


class BudgetTooSmall(MinistructError):
    """Not even the shortest complete output fits in the token budget."""

    def __init__(self, max_tokens: int, least: int) -> None:
        self.max_tokens = max_tokens
        self.least = least
        super().__init__(f"max_tokens={max_tokens} is too small: a complete output needs at least {least} tokens")


class TokenRejected(MinistructError):
    """Matcher.advance() was given a token the grammar does not allow."""


class ModelError(MinistructError):
    """A model file that is missing, unreadable or not a GGUF model."""


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
