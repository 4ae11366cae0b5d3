"""Tokenizer diagnostics (diagnostics.md): what in a vocabulary can surprise a grammar user.

- padded logits rows (n_logits > tokenizer entries) and unused rows: never legal;
- control tokens (never legal unless a grammar names them) and end-of-generation ids;
- tokens whose bytes are not valid UTF-8 on their own (byte fallback, partial characters);
- the same text under several ids: identical bytes (e.g. a byte-fallback token and a
  text token), and SentencePiece leading-space variants (" foo" next to "foo");
- the round trip: re-tokenizing generated text may give other ids with identical bytes.
  That is a tokenizer note, never a change of output.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from ministruct.engine.vocab import Vocabulary


@dataclass
class TokenizerReport:
    """Counts plus a few examples of each vocabulary peculiarity."""

    name: str
    n_tokens: int
    n_logits: int
    padded_rows: int  # logits rows past the tokenizer's entries
    unused_rows: int  # entries with no bytes that are not control tokens
    control: int
    eog: list[str]
    control_examples: list[str]
    invalid_utf8: int
    invalid_utf8_examples: list[dict]  # {"id", "hex"}
    duplicate_bytes: int  # groups of ids with identical, non-empty bytes
    duplicate_examples: list[dict]  # {"text", "ids"}
    leading_space: int  # tokens " x" whose "x" is also a token
    leading_space_examples: list[dict]  # {"text", "ids"}: ids of "x", " x"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def tokenizer_report(vocab: Vocabulary, *, examples: int = 5) -> TokenizerReport:
    """Inspect a vocabulary (one pass over its tokens)."""
    by_bytes: dict[bytes, list[int]] = defaultdict(list)
    invalid: list[int] = []
    unused = 0
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.control_ids:
            continue
        if not tok:
            unused += 1
            continue
        by_bytes[tok].append(i)
        try:
            tok.decode("utf-8")
        except UnicodeDecodeError:
            invalid.append(i)
    dups = [ids for ids in by_bytes.values() if len(ids) > 1]
    spaced = []
    for tok, ids in by_bytes.items():
        if len(tok) > 1 and tok[:1] == b" " and tok[1:].strip() and tok[1:] in by_bytes:
            spaced.append((tok[1:], by_bytes[tok[1:]][0], ids[0]))
    spaced.sort(key=lambda t: (not t[0].isalpha(), t[1]))  # words first, as examples
    control = sorted(vocab.control_ids)
    rep = TokenizerReport(
        name=vocab.name,
        n_tokens=vocab.n_tokens,
        n_logits=vocab.n_logits,
        padded_rows=vocab.n_logits - vocab.n_tokens,
        unused_rows=unused,
        control=len(control),
        eog=[vocab.piece(i) for i in sorted(vocab.eog_ids)],
        control_examples=[vocab.control_text.get(i, f"<{i}>") for i in control[:examples]],
        invalid_utf8=len(invalid),
        invalid_utf8_examples=[{"id": i, "hex": vocab.tokens[i].hex(" ")} for i in invalid[:examples]],
        duplicate_bytes=len(dups),
        duplicate_examples=[
            {"text": vocab.tokens[ids[0]].decode("utf-8", "replace"), "ids": ids} for ids in dups[:examples]
        ],
        leading_space=len(spaced),
        leading_space_examples=[{"text": t.decode("utf-8", "replace"), "ids": [a, b]} for t, a, b in spaced[:examples]],
    )
    rep.notes = _notes(rep)
    return rep


def _notes(rep: TokenizerReport) -> list[str]:
    out = []
    if rep.padded_rows:
        out.append(
            f"{rep.padded_rows:,} logits rows past the {rep.n_tokens:,} tokenizer entries are padding: never legal"
        )
    if rep.unused_rows:
        out.append(f"{rep.unused_rows:,} unused entries (no bytes): never legal")
    if rep.invalid_utf8:
        out.append(
            f"{rep.invalid_utf8:,} tokens are not valid UTF-8 on their own (byte fallback or partial "
            "characters); the engine matches bytes, so they can still complete a character"
        )
    if rep.duplicate_bytes:
        out.append(f"{rep.duplicate_bytes:,} texts have several token ids with identical bytes")
    if rep.leading_space:
        out.append(
            f"{rep.leading_space:,} tokens have a leading-space variant (' x' next to 'x'): the same "
            "visible text under several ids"
        )
    return out


@dataclass
class RoundTrip:
    """Generated ids against the ids the tokenizer gives for the same text."""

    generated: list[int]
    retokenized: list[int]
    same_bytes: bool

    @property
    def same_ids(self) -> bool:
        return self.generated == self.retokenized

    def note(self) -> str | None:
        """A tokenizer note when the ids differ (None when the round trip is exact)."""
        if self.same_ids:
            return None
        k = next(
            (i for i, (a, b) in enumerate(zip(self.generated, self.retokenized)) if a != b),
            min(len(self.generated), len(self.retokenized)),
        )
        what = "identical bytes: the output is unchanged" if self.same_bytes else "different bytes"
        return (
            f"tokenizer note: re-tokenizing the output gives {len(self.retokenized)} ids instead of the "
            f"{len(self.generated)} generated (first difference at token {k}); {what}"
        )

    def to_dict(self) -> dict:
        return {
            "generated": self.generated,
            "retokenized": self.retokenized,
            "same_ids": self.same_ids,
            "same_bytes": self.same_bytes,
        }


def round_trip(vocab: Vocabulary, ids: Sequence[int], tokenize: Callable[[str], list[int]]) -> RoundTrip:
    """Re-tokenize the text of `ids` with `tokenize` (no BOS, no special parsing)."""
    data = vocab.decode(ids)
    again = [int(t) for t in tokenize(data.decode("utf-8", "replace"))]
    return RoundTrip([int(t) for t in ids], again, vocab.decode(again) == data)
