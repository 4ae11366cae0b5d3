"""The think-first flags (--think and its companions): ThinkFlags, and the ThinkSettings
they ask for; `think_flags` gives them to a command."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ministruct.cli.options import with_flags

if TYPE_CHECKING:  # the library loads when a command runs, not for its flags (--help)
    from ministruct.decode.model import Model as LoadedModel
    from ministruct.jobs.think import ThinkSettings

Think = Annotated[
    bool,
    typer.Option(
        "--think",
        help="Let the model write free text first, then the constrained answer after a closing tag. Uses the "
        "model's own think tags where its vocabulary or chat template has them; otherwise the plain-text pair "
        "<think> ... </think>, which the user message announces (the bundled models have none).",
        rich_help_panel="Think first",
    ),
]
ThinkOpen = Annotated[
    Optional[str],
    typer.Option(
        "--think-open",
        metavar="TEXT|none",
        help="The text that opens the thinking (optional in the output); 'none': no opening text. Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkClose = Annotated[
    Optional[str],
    typer.Option(
        "--think-close",
        metavar="TEXT",
        help="The text that ends the thinking (a control token when the vocabulary has one by that text). "
        "Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkTokens = Annotated[
    Optional[int],
    typer.Option(
        "--think-tokens",
        min=0,
        help="The thinking budget: after N tokens only tokens toward the closing text are legal and it is "
        "fast-forwarded. Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkGrammar = Annotated[
    Optional[str],
    typer.Option(
        "--think-grammar",
        metavar="FILE",
        help="A GBNF grammar the thinking must follow (optional). Implies --think.",
        rich_help_panel="Think first",
    ),
]


@dataclass
class ThinkFlags:
    """The think-first flags as given; `settings(...)` the ThinkSettings they ask for."""

    think: bool
    think_open: str | None
    think_close: str | None
    think_tokens: int | None
    think_grammar: str | None

    def requested(self) -> bool:
        return self.think or any(
            v is not None for v in (self.think_open, self.think_close, self.think_tokens, self.think_grammar)
        )

    def settings(self, model: "LoadedModel | None" = None, template: str | None = None) -> "ThinkSettings | None":
        """None without think flags; else the preset (the model's tags, or the family's of
        `template` without a model, or the plain pair) with the flags given over it."""
        from ministruct.jobs.think import preset, preset_of_template

        if not self.requested():
            return None
        base = preset(model.vocabulary, model.chat_template) if model is not None else preset_of_template(template)
        changes: dict[str, Any] = {}
        if self.think_open is not None:
            changes["open"] = None if self.think_open == "none" else self.think_open
        if self.think_close is not None:
            changes["close"] = self.think_close
        if self.think_open is not None or self.think_close is not None:
            changes["announce"] = True  # tags of the user's choosing: the model must be told
        if self.think_grammar is not None:
            from ministruct.grammar.constraint import load_constraint

            changes["grammar"] = load_constraint(grammar=self.think_grammar).grammar
        return dataclasses.replace(base, think_tokens=self.think_tokens, **changes)


_THINK_PARAMS = (
    ("think", Think, False),
    ("think_open", ThinkOpen, None),
    ("think_close", ThinkClose, None),
    ("think_tokens", ThinkTokens, None),
    ("think_grammar", ThinkGrammar, None),
)


def think_flags(fn):
    """Give a command the think-first flags; it receives `think: ThinkFlags`."""
    return with_flags(fn, "think", _THINK_PARAMS, lambda d: ThinkFlags(**d))
