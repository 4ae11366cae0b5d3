"""The one table from library errors to what the command line says: flags for
parameters, exit codes for error classes (cli.md, "Exit codes")."""

from __future__ import annotations

import re

from ministruct.errors import BudgetTooSmall, GrammarSyntaxError, MinistructError, NoLegalContinuation, UsageError

# library parameter -> the flag (or argument) that sets it
FLAGS = {
    "temperature": "--temperature",
    "top_p": "--top-p",
    "top_k": "--top-k",
    "repeat_penalty": "--repeat-penalty",
    "seed": "--seed",
    "max_tokens": "--max-tokens",
    "regex": "--regex",
    "grammar": "--grammar",
    "schema": "--schema",
    "choice": "--choice",
    "lark": "--lark",
    "lark_lexer": "--lark-lexer",
    "lexer": "--lark-lexer",
    "root": "--root",
    "lenient": "--lenient",
    "whitespace": "--whitespace",
    "extra_properties": "--extra-properties",
    "oneof_as_anyof": "--oneof-as-anyof",
    "documents": "--schema-documents",
    "chat": "--chat/--raw",
    "system": "--system",
    "seeds": "--seeds",
    "temperatures": "--temperatures",
    "top_ps": "--top-ps",
    "trace": "--trace",
    "prompt": "PROMPT or --input",
    "input": "--input",
    "format": "--format",
    "n": "--n",
    "particles": "--particles",
    "ess": "--ess",
    "server": "--server",
    "kind": "--server-kind",
    "concurrency": "--concurrency",
    "retry_unverified": "--retry-unverified",
    "timeout": "--timeout",
    "model": "--model",
    "think": "--think",
    "think_tokens": "--think-tokens",
    "think_open": "--think-open",
    "think_close": "--think-close",
    "tools": "--tools",
    "tool_choice": "--tool-choice",
    "parallel_tool_calls": "--parallel-tool-calls",
    "tool_format": "--tool-format",
}

# first match wins: the job ran but the result is not what was asked -> 1; bad usage or input -> 2
EXIT_CODES: tuple[tuple[type[MinistructError], int], ...] = (
    (NoLegalContinuation, 1),
    (BudgetTooSmall, 1),
    (MinistructError, 2),
)


def exit_code(e: MinistructError) -> int:
    """The process exit code for a library error."""
    return next(code for cls, code in EXIT_CODES if isinstance(e, cls))


def flag_text(message: str) -> str:
    """A library message with `parameter=value` (or a parameter in backquotes) written
    as the flag that sets it (`max_tokens=5` -> `--max-tokens 5`, `chat=False` -> `--raw`)."""
    message = message.replace("chat=False", "--raw")
    message = re.sub(r"`(\w+)`", lambda m: FLAGS.get(m.group(1), m.group(0)), message)  # `regex` -> --regex
    message = re.sub(r"\b(lenient|oneof_as_anyof)=True\b", lambda m: FLAGS[m.group(1)], message)  # switches
    return re.sub(r"\b(\w+)=(?=\S)", lambda m: FLAGS[m.group(1)] + " " if m.group(1) in FLAGS else m.group(0), message)


def error_text(e: MinistructError) -> str:
    """The stderr text: one line (a usage error names the flag), plus the line and caret
    for syntax errors."""
    body = str(e)
    if isinstance(e, UsageError) and e.parameter in FLAGS:
        flag = FLAGS[e.parameter]
        if body.startswith(e.parameter):
            body = flag + body[len(e.parameter) :]
        elif flag not in flag_text(body):
            body += f" ({flag})"
    text = f"ministruct: error: {flag_text(body)}"
    if isinstance(e, GrammarSyntaxError) and e.source != "<regex>":
        excerpt = e.excerpt()
        if excerpt:
            text += "\n" + excerpt
    return text
