"""Think first, then answer: the settings of a job's free text before its constraint, the
preset's tags, the prompt's announcement and the reasoning/answer split of a result.

The preset (`--think`) uses the think tags of the model family its chat template writes
(grammar/tool_families.py), or its vocabulary's `</think>` control token; else a
plain-text pair, `<think>` and `</think>`, that the user message announces (neither
bundled model has think tags).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ministruct.errors import UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.ir import Grammar, TokenRef
from ministruct.grammar.tool_families import think_of_template

if TYPE_CHECKING:
    from ministruct.engine.vocab import Vocabulary

PLAIN_OPEN, PLAIN_CLOSE = "<think>", "</think>"
ANNOUNCEMENT = (
    "Think it through step by step first, inside {open}{close_hint}, then write {close} and give the answer "
    "right after it."
)
NATIVE_PAIRS = (("<think>", "</think>"),)  # (open, close) as reasoning models' templates write them


@dataclass(frozen=True)
class ThinkSettings:
    """Free text before the constraint.

    `open` None: no opening text (the output starts thinking at once); `close` ends the
    thinking (a control token of the vocabulary when one has that text, else plain
    text); `think_tokens`: the thinking budget (None: only the overall budget);
    `grammar`: a grammar for the thinking itself; `announce`: tell the model the tags in
    the user message (off when the model's own chat template already knows them)."""

    open: str | None = PLAIN_OPEN
    close: str = PLAIN_CLOSE
    think_tokens: int | None = None
    grammar: Grammar | None = field(default=None, compare=False)
    announce: bool = True

    def __post_init__(self) -> None:
        if not self.close:
            raise UsageError("the closing text of the thinking is empty", parameter="think_close")
        if self.think_tokens is not None and self.think_tokens < 0:
            raise UsageError(f"think_tokens must be >= 0, got {self.think_tokens}", parameter="think_tokens")
        if self.open is not None and self.close in self.open:
            raise UsageError(
                f"the opening text {self.open!r} contains the closing text {self.close!r}", parameter="think_open"
            )

    def with_tokens(self, think_tokens: int | None) -> "ThinkSettings":
        return replace(self, think_tokens=think_tokens)


def preset(vocab: "Vocabulary", chat_template: str | None) -> ThinkSettings:
    """The `--think` preset for a model: its family's tags (read from its chat template), or
    its vocabulary's `</think>` control token, or the announced plain-text pair."""
    own = preset_of_template(chat_template)
    if own.announce is False:
        return own
    for open_, close in NATIVE_PAIRS:
        if vocab.id_of_control(close) is not None:
            return ThinkSettings(open_, close, announce=False)
    return ThinkSettings()


def preset_of_template(chat_template: str | None) -> ThinkSettings:
    """The `--think` preset a chat template says: its family's reasoning pair (grammar/
    tool_families.py: Qwen3's and DeepSeek's <think>, gpt-oss' analysis channel, Seed-OSS'
    <seed:think>, ...; a template that opens the thinking in its generation prompt works the
    same: OPEN is optional in the output), else the announced plain-text pair."""
    _, pair = think_of_template(chat_template)
    if pair is None:
        return ThinkSettings()
    return ThinkSettings(pair[0], pair[1], announce=False)


def think_constraint(constraint: Constraint, think: ThinkSettings, vocab: "Vocabulary") -> Constraint:
    """The constraint with free text first; CLOSE as the control token of that text where
    the vocabulary has one. An OPEN or CLOSE that is the model's end-of-generation token is
    refused: writing it ends the generation, not the thinking."""
    for text, parameter in ((think.open, "think_open"), (think.close, "think_close")):
        tid = vocab.id_of_control(text) if text else None
        if tid is not None and tid in vocab.eog_ids:
            what = "opening" if parameter == "think_open" else "closing"
            raise UsageError(
                f"the {what} text of the thinking, {text!r}, is the model's end-of-generation token "
                f"(id {tid}): writing it ends the generation, not the thinking; choose another text",
                parameter=parameter,
            )
    close: str | TokenRef = think.close
    if vocab.id_of_control(think.close) is not None:
        close = TokenRef(name=think.close)
    try:
        return constraint.think_first(close=close, open=think.open, free=think.grammar)
    except ValueError as e:
        raise UsageError(str(e), parameter="think_close") from None


SERVER_CHARS_PER_TOKEN = 3  # a server's grammar cannot count tokens: the budget becomes a length


def think_on_servers(constraint: Constraint, think: ThinkSettings) -> Constraint:
    """The constraint with free text first for a server fleet: CLOSE is text (no vocabulary
    here), and the thinking budget is a bound on the thinking's length in the grammar
    (SERVER_CHARS_PER_TOKEN code points per token: grammar/think.py `max_free`)."""
    if think.grammar is not None and think.think_tokens is not None:
        raise UsageError("think_tokens with a think grammar cannot be sent to servers", parameter="think_tokens")
    bound = None if think.think_tokens is None else SERVER_CHARS_PER_TOKEN * think.think_tokens
    try:
        return constraint.think_first(close=think.close, open=think.open, free=think.grammar, max_free=bound)
    except ValueError as e:
        raise UsageError(str(e), parameter="think_close") from None


def announce(message: str, think: ThinkSettings) -> str:
    """The user message with the tags announced (unchanged when the model knows them)."""
    if not think.announce:
        return message
    hint = f" ... {think.close}" if think.open else ""
    text = ANNOUNCEMENT.format(open=think.open or "free text", close=think.close, close_hint=hint)
    return f"{message}\n\n{text}"


def split_output(output: bytes, answer_start: int | None, close_len: int, open_text: str | None) -> tuple[str, str]:
    """(reasoning, answer) of an output whose answer starts at byte `answer_start` (None:
    the thinking never ended, all of it is reasoning); OPEN is left out of the reasoning."""
    if answer_start is None:
        free, answer = output, b""
    else:
        free, answer = output[: max(answer_start - close_len, 0)], output[answer_start:]
    reasoning = free.decode("utf-8", "replace")
    if open_text and reasoning.lstrip().startswith(open_text):
        reasoning = reasoning.lstrip()[len(open_text) :]
    return reasoning, answer.decode("utf-8", "replace")


__all__ = [
    "PLAIN_CLOSE",
    "PLAIN_OPEN",
    "ThinkSettings",
    "announce",
    "preset",
    "preset_of_template",
    "split_output",
    "think_constraint",
    "think_on_servers",
]
