"""Grammar positions of output bytes, read off the parser's configurations.

A position is where in the grammar a byte was consumed: for a grammar with marks
(Grammar.marks, left by the JSON Schema front end with `SchemaOptions(marks=True)`),
the JSON pointer of the value being generated and the part ("key", "value",
"structure", "whitespace"); for any other grammar, the innermost rule (part "rule").

Each byte's position comes from the stacks of the configuration that consumed it, and
only the stacks that lie on a parse of the whole output (a backward pass over the
configurations), so a key that two optional members share a prefix of is told apart
once the output shows which one it is. Array items repeat one rule, so their index
is `*` (prefixItems keep theirs). A member whose key the output names (additional and
pattern properties: the mark's segment is KEY_SEGMENT) takes its key from the output:
the JSON string its key bytes hold, as a pointer segment (`*` while it is cut off).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from ministruct.engine.automaton import Automaton, Config, Stack
from ministruct.grammar.ir import KEY_SEGMENT
from ministruct.grammar.limits import pointer_token

ROOT = ""
END = "(end)"


@dataclass(frozen=True, order=True)
class Position:
    """A JSON pointer (or a rule name) and the part of it being generated."""

    pointer: str
    part: str

    def label(self) -> str:
        """`pointer part`, the root shown as `/`."""
        return f"{self.pointer or '/'} {self.part}"


END_POSITION = Position(END, "end")


class PositionReader:
    """Positions of stacks and of the bytes of an output, for one automaton."""

    def __init__(self, automaton: Automaton) -> None:
        self.auto = automaton
        self.marks = automaton.grammar.marks
        self._memo: dict[Stack, Position] = {}

    def of_stack(self, stack: Stack) -> Position:
        """The position a stack is at (marks: segments bottom to top, innermost part)."""
        hit = self._memo.get(stack)
        if hit is not None:
            return hit
        a = self.auto
        if not stack:
            pos = END_POSITION
        elif self.marks:
            segments: list[str] = []
            part = "structure"
            for q in stack:
                m = self.marks.get(a.rule_names[a.rule_of[q]])
                if m is None:
                    continue
                if m.segment is not None:
                    segments.append(m.segment)
                if m.part is not None:
                    part = m.part
            pos = Position("".join("/" + s for s in segments), part)
        else:
            name = a.rule_names[a.rule_of[stack[-1]]]
            pos = Position(a.hidden_parent.get(name, name), "rule")
        self._memo[stack] = pos
        return pos

    def configurations(self, data: bytes, start: Config | None = None) -> list[Config]:
        """The configuration before each byte and after the last (shorter when a byte is refused)."""
        a = self.auto
        configs = [a.initial if start is None else start]
        for b in data:
            nxt = a.step(configs[-1], b)
            if not nxt:
                break
            configs.append(nxt)
        return configs

    def of_bytes(self, data: bytes, start: Config | None = None) -> list[tuple[Position, ...]]:
        """For each byte, the positions of the stacks that consumed it on a parse of all
        of `data` (sorted; one for an unambiguous grammar; empty past a refused byte)."""
        a = self.auto
        configs = self.configurations(data, start)
        n = len(configs) - 1
        out: list[tuple[Position, ...]] = [()] * len(data)
        alive: frozenset | set = configs[n]
        for k in range(n - 1, -1, -1):
            b = data[k]
            source, resolved = configs[k], False
            if a.greedy and not a._step_stacks(source, b) and a.has_markers(source):
                source, resolved = a.resolve(source), True  # (the byte started the next lexeme)
            now = set()
            for st in source:
                if not st:
                    continue
                for t in a._targets(st[-1], b):
                    reached = a.closure(st[:-1] + (t,))
                    if a.greedy:
                        reached = reached | a.settle(reached)
                    if not reached.isdisjoint(alive):
                        now.add(st)
                        break
            out[k] = tuple(sorted({self.of_stack(st) for st in now}))
            if resolved:  # the lexemes that ended before byte k, on a parse of the rest
                markers = [st for st in configs[k] if a.is_marker(st)]
                ended = {st for st in markers if not a.resolve(frozenset((st,))).isdisjoint(now)}
                now = ended or set(markers)
            alive = now
        return _named_keys(data, out) if self.marks else out

    def of_tokens(self, pieces: Sequence[bytes], start: Config | None = None) -> list[list[tuple[Position, int]]]:
        """Per token, its runs of bytes by position: [(position, n_bytes), ...] in order
        (a token without bytes, such as end-of-generation, gets [(END_POSITION, 0)])."""
        per_byte = self.of_bytes(b"".join(pieces), start)
        out: list[list[tuple[Position, int]]] = []
        i = 0
        for piece in pieces:
            runs: list[tuple[Position, int]] = []
            for k in range(i, i + len(piece)):
                p = per_byte[k][0] if per_byte[k] else Position("?", "unknown")
                if runs and runs[-1][0] == p:
                    runs[-1] = (p, runs[-1][1] + 1)
                else:
                    runs.append((p, 1))
            out.append(runs or [(END_POSITION, 0)])
            i += len(piece)
        return out


def _named_keys(data: bytes, per_byte: list[tuple[Position, ...]]) -> list[tuple[Position, ...]]:
    """Every KEY_SEGMENT replaced by the key the output wrote there: a run of bytes whose
    position is (pointer ending in KEY_SEGMENT, "key") is that member's key."""
    marker = "/" + KEY_SEGMENT
    if not any(marker in p.pointer for ps in per_byte for p in ps):
        return per_byte
    keys: dict[int, str] = {}  # segment index -> the key of the member open there
    out: list[tuple[Position, ...]] = []
    k = 0
    while k < len(per_byte):
        ps = per_byte[k]
        key_at = next((p for p in ps if p.part == "key" and p.pointer.endswith(marker)), None)
        n = 1
        if key_at is not None:
            while k + n < len(per_byte) and key_at in per_byte[k + n]:
                n += 1
            depth = key_at.pointer.count("/")
            keys = {d: v for d, v in keys.items() if d < depth}
            keys[depth] = _key_segment(data[k : k + n])
        for i in range(k, k + n):
            out.append(tuple(sorted({_filled(p, keys) for p in per_byte[i]})))
        k += n
    return out


def _filled(p: Position, keys: dict[int, str]) -> Position:
    if KEY_SEGMENT not in p.pointer:
        return p
    segs = p.pointer.split("/")
    segs = [keys.get(i, "*") if s == KEY_SEGMENT else s for i, s in enumerate(segs)]
    return Position("/".join(segs), p.part)


def _key_segment(text: bytes) -> str:
    """The pointer segment of a JSON string's bytes (`*` when it is not a whole string)."""
    try:
        key = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "*"
    if not isinstance(key, str):
        return "*"
    return pointer_token(key)
