"""Forced bytes: the stretch of output the grammar alone dictates from a configuration.

From a parser configuration, follow the automaton while exactly one byte may come next
and the output so far is not complete (a complete output could also end there): those
bytes are forced, whatever the model would prefer. The decoder's fast-forward
(decode/loop.py) evaluates them in one batch instead of sampling them token by token.

Built only on CompiledGrammar's stable surface (`configs`, `step_bytes`, and the
automaton's `allowed_bytes`, `is_accepting`, `token_edges`); results are cached per
configuration id on the CompiledGrammar they were computed for.
"""

from __future__ import annotations

from ministruct.engine.compile import DEAD, CompiledGrammar

MAX_FORCED = 512  # bytes followed at most from one configuration (a bound, not a limit in practice)


class ForcedBytes:
    """forced(cid) for one CompiledGrammar, memoized per configuration id."""

    def __init__(self, compiled: CompiledGrammar, limit: int = MAX_FORCED) -> None:
        self.compiled = compiled
        self.limit = limit
        self._cache: dict[int, bytes] = {}

    def next_byte(self, cid: int) -> int | None:
        """The one byte allowed next in `cid`, or None (several, none, or the output is
        complete, or a whole-token edge `<[N]>` is possible)."""
        if cid == DEAD:
            return None
        a = self.compiled.automaton
        config = self.compiled.configs[cid]
        if a.is_accepting(config):
            return None
        if a.has_token_edges:
            stacks = config | a.resolve(config) if a.greedy and a.has_markers(config) else config
            if any(st and a.token_edges[st[-1]] for st in stacks):
                return None
        ranges = a.allowed_bytes(config)
        if len(ranges) != 1 or ranges[0][0] != ranges[0][1]:
            return None
        return ranges[0][0]

    def forced(self, cid: int) -> bytes:
        """The longest byte string the grammar dictates from `cid` (b"" when the next
        byte is a choice); at most `limit` bytes."""
        hit = self._cache.get(cid)
        if hit is not None:
            return hit
        out = bytearray()
        path: list[int] = []
        c = cid
        while len(out) < self.limit:
            b = self.next_byte(c)
            if b is None:
                break
            nxt = self.compiled.step_bytes(c, bytes([b]))
            if nxt == DEAD:
                break
            path.append(c)
            out.append(b)
            c = nxt
            hit = self._cache.get(c)
            if hit is not None:  # the rest is known: splice it on
                out += hit[: self.limit - len(out)]
                break
        result = bytes(out)
        if len(result) < self.limit:
            # every configuration on the way dictates the rest of the same stretch
            for i, p in enumerate(path):
                self._cache.setdefault(p, result[i:])
        self._cache[cid] = result
        return result


def forced_for(compiled: CompiledGrammar) -> ForcedBytes:
    """The ForcedBytes of a CompiledGrammar, built on first use and kept with it."""
    return compiled.companion("forced", ForcedBytes)


def forced_bytes(compiled: CompiledGrammar, cid: int) -> bytes:
    """The bytes the grammar dictates from configuration `cid` (see ForcedBytes.forced)."""
    return forced_for(compiled).forced(cid)


__all__ = ["ForcedBytes", "forced_for", "forced_bytes", "MAX_FORCED"]
