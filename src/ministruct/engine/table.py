"""Parser configurations interned to small integers, and their byte-class transition table.

The table fills itself on demand (a lazily determinized pushdown automaton): row = a
configuration id, column = a byte class of the grammar, cell = the configuration id
after one byte of that class (DEAD = 0 when the byte is not allowed, UNKNOWN until
first asked). Not thread-safe by itself: CompiledGrammar serializes every call.

A byte steps each stack on its own, so a step of a union is the union of the steps. A
configuration of many stacks that a step makes is kept as the union of the few
configurations its stacks reached (`parts`), and its cells are unions of the parts' cells:
the configurations of an ambiguous grammar (a name that may end at every character, next
to the prefix of a keyword) share their big parts, whose cells are filled once. The
same holds for tokens: a union's mask is the union of its parts' masks (compile.py), and
the compiled walk goes on below a union from each part, without filling the union's row
(`part_start`, `part_count`, `part_ids`: the parts as arrays, for native.py).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from ministruct.engine.automaton import ACCEPT, MAX_STACKS, Automaton, Config
from ministruct.engine.pages import fresh_pages, grown, reserved, table_rows
from ministruct.engine.spans import disjoint
from ministruct.errors import CompileLimitError

DEAD = 0
UNKNOWN = -1
MAX_CONFIGS = 1_000_000
STACK_PIECES_KEPT = 100_000
FEW_PIECES = 8  # a row of up to this many segments is written a slice at a time, longer ones from a list
MERGED_KEPT = 10_000  # configurations of several stacks whose merged pieces are kept
FEW_CELLS = 8  # a row asked for in at most this many classes may be stepped cell by cell
CELLS_MIN_STACKS = 8  # ... when its configuration has at least this many stacks (the walk asks)
MAX_PARTS = 8  # a configuration is kept as the union of at most this many others (see Transitions.parts)
UNIONS_KEPT = 200_000
CHAIN_AHEAD = 24  # rows of a literal filled together (see Transitions._fill_chain)
T = TypeVar("T")


class Transitions:
    """configs[id] <-> id, `table[id, class]`, and `accept[id]` (ACCEPT is in the configuration;
    with greedy lexemes a text may also end where lexemes end: Automaton.is_accepting says)."""

    def __init__(self, automaton: Automaton, byte_class: np.ndarray, class_rep: np.ndarray, source: str) -> None:
        self.automaton = automaton
        self.greedy = bool(getattr(automaton, "greedy", False))  # (greedy lexemes: Automaton.step)
        self.byte_class = byte_class
        self._class_of: list[int] = [int(c) for c in byte_class]
        self.class_rep = class_rep
        self.n_classes = len(class_rep)
        self.source = source
        self.configs: list[Config] = [frozenset()]
        self.ids: dict[Config, int] = {frozenset(): DEAD}
        # rows past len(configs) are unwritten: intern writes a row UNKNOWN when it allocates it
        rows = table_rows(self.n_classes)
        self.table = fresh_pages((rows, self.n_classes), np.int32)
        self.table[DEAD, :] = DEAD
        self.accept = np.zeros(rows, dtype=bool)
        self.complete = np.zeros(rows, dtype=np.int8)  # 1: the row has no UNKNOWN cell (set by fill_row and the kernel)
        self._segments_of: dict[int, tuple[tuple[int, int, tuple[int, ...]], ...]] = {}
        self._stack_pieces: dict[tuple, list[tuple[int, int, frozenset]]] = {}
        self._merged: dict[int, list[tuple[int, int, frozenset]]] = {}
        # id -> ids of smaller configurations whose union it is: one byte steps every
        # stack on its own, so a cell is the union of the parts' cells
        self.parts: dict[int, tuple[int, ...]] = {}
        # the same as arrays for the compiled walk, once asked for (use_part_arrays): parts
        # of id c are part_ids[part_start[c] : part_start[c] + part_count[c]] (none: count 0)
        self.part_start = np.zeros(0, dtype=np.int64)
        self.part_count = np.zeros(0, dtype=np.int64)
        self.part_ids = np.zeros(0, dtype=np.int64)
        self._n_part_ids = 0
        self._unions: dict[tuple[int, ...], int] = {}
        self._templates: dict[Config, list] = {}  # (greedy) relative stacks -> their pieces (_greedy_pieces)
        # state -> the same state in a representative copy of a long repeat (see
        # Automaton.canonical_states); canon[id] is the id of the configuration's image
        self.canon_map: dict[int, int] = {}
        self._mapped: frozenset[int] = frozenset()
        self.canon = np.zeros(rows, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.configs)

    def intern(self, config: Config) -> int:
        """The id of a configuration, allocating a table row for a new one."""
        cid = self.ids.get(config)
        if cid is not None:
            return cid
        cid = len(self.configs)
        if cid >= MAX_CONFIGS:
            raise CompileLimitError(
                f"{self.source}: more than {MAX_CONFIGS:,} parser configurations; "
                "the grammar is too large or too deeply nested to mask"
            )
        if cid >= len(self.table):
            size = 2 * len(self.table)
            self.table = reserved(self.table, size, cid)
            self.accept = grown(self.accept, size)
            self.complete = grown(self.complete, size)
            self.canon = grown(self.canon, size)
            if len(self.part_count):
                self._grow_part_arrays(size)
        self.table[cid] = UNKNOWN
        self.configs.append(config)
        self.ids[config] = cid
        self.accept[cid] = ACCEPT in config  # (greedy lexemes: the text may end later too, Automaton.is_accepting)
        self.canon[cid] = self._image(cid)
        return cid

    def set_canon_map(self, canon_map: dict[int, int]) -> None:
        """Name the representative of each state (ids interned so far are mapped again)."""
        self.canon_map = canon_map
        self._mapped = frozenset(canon_map)
        for cid in range(len(self.configs)):
            self.canon[cid] = self._image(cid)

    def _image(self, cid: int) -> int:
        """The id of the configuration with every state replaced by its representative."""
        if not self.canon_map:
            return cid
        config = self.configs[cid]
        mapped = self._mapped
        if len(config) == 1:
            if mapped.isdisjoint(next(iter(config))):
                return cid
        elif all(mapped.isdisjoint(st) for st in config):
            return cid
        get = self.canon_map.get
        image = frozenset(tuple(get(q, q) for q in st) for st in config)
        if image == config:
            return cid
        image_id = self.intern(image)  # may grow the arrays: index the grown one
        return int(self.canon[image_id])

    def fill_rows(self, states: list[int]) -> None:
        """Fill the rows of these configurations. A walk that needs one cell of a row
        needs others soon (one pass over the row's segments costs about what stepping a
        few cells one by one does)."""
        for s in dict.fromkeys(states):
            if not self.complete[s]:
                self.fill_row(s)

    def fill_cells(self, states: np.ndarray, classes: np.ndarray) -> None:
        """Make the cells (states[k], classes[k]) known. A row asked for in more than a
        few classes is filled whole; one asked for in a few (a narrow node deep in the
        trie) is stepped cell by cell: for a configuration of many stacks that costs a
        small part of its row (one union of stacks per class instead of one per segment)."""
        unknown_cells = self.table[states, classes] == UNKNOWN
        keys = (states[unknown_cells] * self.n_classes + classes[unknown_cells]).tolist()
        wanted: dict[int, list[int]] = {}
        for key in sorted(set(keys)):
            s, c = divmod(key, self.n_classes)
            cs = wanted.get(s)
            if cs is None:
                wanted[s] = [c]
            else:
                cs.append(c)
        for s, unknown in wanted.items():
            if len(unknown) > FEW_CELLS:
                self.fill_row(s)
            else:
                for c in unknown:
                    self._fill_cell(s, c)

    def _fill_cell(self, state: int, cls: int) -> int:
        """Make one cell known: from the parts' cells where the configuration has parts,
        else from its stacks' (for a configuration of many stacks, the distinct configurations
        its stacks reach on that class become the parts of the target)."""
        parts = self.parts.get(state)
        if self.greedy:  # (a step is not the union of the stacks' steps)
            nxt = self.intern(self.automaton.step(self.configs[state], int(self.class_rep[cls])))
        elif parts is not None:
            reached = []
            for p in parts:
                t = int(self.table[p, cls])
                if t == UNKNOWN:
                    t = self._fill_cell(p, cls)
                if t != DEAD:
                    reached.append(t)
            nxt = self.union(reached)
        elif len(self.configs[state]) < CELLS_MIN_STACKS:  # (a few stacks: parts would cost more than they save)
            nxt = self.intern(self.automaton.step(self.configs[state], int(self.class_rep[cls])))
        else:
            seen: dict[int, Config] = {}
            for st in self.configs[state]:
                x = self._stack_cell(st, cls)
                if x is not None:
                    seen[id(x)] = x
            nxt = self.union([self.intern(x) for x in seen.values()])
        self.table[state, cls] = nxt  # (intern may have grown the table)
        return nxt

    def union(self, ids: list[int]) -> int:
        """The id of the union of these configurations (DEAD for none); a new union of
        a few keeps them as its parts."""
        if not ids:
            return DEAD
        if len(ids) == 1:
            return ids[0]
        key = tuple(sorted(set(ids)))
        if len(key) == 1:
            return key[0]
        hit = self._unions.get(key)
        if hit is not None:
            return hit
        configs = self.configs
        target = frozenset().union(*(configs[i] for i in key))
        self._check_stacks(target)
        cid = self.intern(target)
        if len(key) <= MAX_PARTS and cid not in key and cid not in self.parts and not self.greedy:
            self._set_parts(cid, key)
        if len(self._unions) >= UNIONS_KEPT:
            self._unions.clear()
        self._unions[key] = cid
        return cid

    def use_part_arrays(self) -> None:
        """Keep `parts` as arrays too (part_start, part_count, part_ids) from now on."""
        if not len(self.part_count):
            self._grow_part_arrays(len(self.table))
            for cid, key in self.parts.items():
                self._write_parts(cid, key)

    def _grow_part_arrays(self, size: int) -> None:
        self.part_start = grown(self.part_start, size)
        self.part_count = grown(self.part_count, size)

    def _set_parts(self, cid: int, key: tuple[int, ...]) -> None:
        self.parts[cid] = key
        if len(self.part_count):
            self._write_parts(cid, key)

    def _write_parts(self, cid: int, key: tuple[int, ...]) -> None:
        n = self._n_part_ids
        if n + len(key) > len(self.part_ids):
            grown = np.zeros(2 * (n + len(key)), dtype=np.int64)
            grown[:n] = self.part_ids[:n]
            self.part_ids = grown
        self.part_ids[n : n + len(key)] = key
        self.part_start[cid] = n
        self.part_count[cid] = len(key)
        self._n_part_ids = n + len(key)

    def _stack_cell(self, st: tuple, cls: int) -> Config | None:
        """The configuration one stack reaches on a byte of class `cls` (None: not allowed):
        only that class's closure, unless the stack's `_pieces` are known already."""
        pieces = self._stack_pieces.get(st)
        if pieces is not None:
            for lo, hi, target in pieces:
                if cls < hi:
                    return target if lo <= cls else None
            return None
        if not st:
            return None
        for lo, hi, ts in self.segments(st[-1]):
            if cls < hi:
                if cls < lo:
                    return None
                target = self._target(st[:-1], ts)
                self._check_width([(lo, hi, target)])
                return target
        return None

    def _target(self, head: tuple, ts: tuple[int, ...]) -> Config:
        """The configuration a stack `head + (q,)` reaches through a segment of q's to `ts`."""
        closure = self.automaton.closure
        if len(ts) == 1:
            return closure(head + ts)
        return frozenset().union(*(closure(head + (t,)) for t in ts))

    def segments(self, q: int) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
        """State q's byte edges as disjoint class segments (lo, hi, targets), in order;
        classes outside every segment are not allowed from q."""
        hit = self._segments_of.get(q)
        if hit is None:
            bc = self._class_of
            edges = self.automaton.byte_edges[q]
            if len(edges) <= 1:  # (most states: inside a literal or a character)
                hit = self._segments_of[q] = tuple((bc[lo], bc[hi] + 1, (t,)) for lo, hi, t in edges)
                return hit
            spans = [(bc[lo], bc[hi] + 1, t) for lo, hi, t in edges]
            hit = self._segments_of[q] = tuple(
                (lo, hi, (ts[0],) if len(ts) == 1 else tuple(sorted(set(ts)))) for lo, hi, ts in disjoint(spans)
            )
        return hit

    def _pieces(self, st: tuple) -> list[tuple[int, int, frozenset]]:
        """(lo, hi, configuration) per class segment one stack can take (shared by every
        configuration holding the stack)."""
        hit = self._stack_pieces.get(st)
        if hit is None:
            hit = []
            if st:
                head = st[:-1]
                hit = [(lo, hi, self._target(head, ts)) for lo, hi, ts in self.segments(st[-1])]
            self._check_width(hit)
            if len(self._stack_pieces) >= STACK_PIECES_KEPT:
                self._stack_pieces.clear()
            self._stack_pieces[st] = hit
        return hit

    def pieces_of(self, cid: int) -> list[tuple[int, int, Config]]:
        """`pieces` of an interned configuration (a merge of several stacks' is kept)."""
        config = self.configs[cid]
        if len(config) == 1:
            return self._pieces(next(iter(config)))
        hit = self._merged.get(cid)
        if hit is None:
            if len(self._merged) >= MERGED_KEPT:
                self._merged.clear()
            hit = self._merged[cid] = self.pieces(config)
        return hit

    def pieces(self, config: Config) -> list[tuple[int, int, Config]]:
        """The configuration after one byte of each class, as disjoint class segments
        (lo, hi, configuration) in order; classes outside every segment lead nowhere."""
        if len(config) == 1:
            return self._pieces(next(iter(config)))
        pieces = [
            (lo, hi, cs[0] if len(cs) == 1 else frozenset().union(*cs))
            for lo, hi, cs in disjoint([p for st in config for p in self._pieces(st)])
        ]
        self._check_width(pieces)
        return pieces

    def _check_width(self, pieces: list[tuple[int, int, Config]]) -> None:
        for _, _, target in pieces:
            self._check_stacks(target)

    def _check_stacks(self, config: Config) -> None:
        """CompileLimitError when more than MAX_STACKS parses are alive at once."""
        if len(config) > MAX_STACKS:
            raise CompileLimitError(f"{self.source}: grammar too ambiguous: {len(config):,} parses alive at once")

    def fill_row(self, state: int) -> None:
        """Every cell of a row. With parts: the union of the parts' rows, one per distinct
        column. Else from one pass over the configuration's byte edges (each edge covers
        whole classes: their bounds are the edges' bounds); classes between two
        consecutive segment bounds share one target, interned once."""
        parts = self.parts.get(state)
        if parts is not None:
            self._fill_row_from(state, parts)
            return
        if self.greedy:
            self._fill_row_greedy(state)
            return
        config = self.configs[state]
        if len(config) == 1:
            st = next(iter(config))
            if st and len(self.automaton.byte_edges[st[-1]]) == 1:
                self._fill_chain(state, st)
                return
        if len(config) < CELLS_MIN_STACKS:
            pieces = self.pieces_of(state)
            ids = [self.intern(target) for _, _, target in pieces]  # (intern may grow, replace, the table)
        else:
            pieces = disjoint([p for st in config for p in self._pieces(st)])
            ids = [self.union([self.intern(x) for x in dict.fromkeys(cs)]) for _, _, cs in pieces]
        if len(pieces) <= FEW_PIECES:
            row = self.table[state]
            row[:] = DEAD  # (a known cell is rewritten with the id it already holds)
            for (lo, hi, _), cid in zip(pieces, ids):
                row[lo:hi] = cid
        else:
            cells = [DEAD] * self.n_classes
            for (lo, hi, _), cid in zip(pieces, ids):
                cells[lo:hi] = [cid] * (hi - lo)
            self.table[state] = cells
        self.complete[state] = 1

    def _fill_row_greedy(self, state: int) -> None:
        """A row with greedy lexemes: where some stack goes on with a byte, the stacks that
        do (lazy lexemes settled); elsewhere, when lexemes may end here, the row of the
        configuration after they end."""
        automaton = self.automaton
        config = self.configs[state]
        cells = [DEAD] * self.n_classes
        for lo, hi, target in self._greedy_pieces(state):
            cid = self.intern(automaton.settle(target))
            cells[lo:hi] = [cid] * (hi - lo)
        if automaton.has_markers(config):
            after = self.row(self.intern(automaton.resolve(config))).tolist()
            cells = [c if c != DEAD else a for c, a in zip(cells, after)]
        self.table[state] = cells  # (intern may have grown the table)
        self.complete[state] = 1

    def _greedy_pieces(self, state: int) -> list[tuple[int, int, Config]]:
        """`pieces_of` a configuration of many stacks (a boundary between lexemes: one stack
        per lexeme that may come next), from the pieces of its stacks above the frames they
        all share, which boundaries in other contexts (another nesting, another caller)
        share too; where a byte would return below those frames, as pieces_of."""
        config = self.configs[state]
        if len(config) < CELLS_MIN_STACKS or ACCEPT in config:
            return self.pieces_of(state)
        lo_st, hi_st = min(config), max(config)
        p = min(len(lo_st), len(hi_st)) - 1
        while p > 0 and lo_st[:p] != hi_st[:p]:
            p -= 1
        if p == 0 or any(len(st) <= p for st in config):
            return self.pieces_of(state)
        rel = frozenset(st[p:] for st in config)
        tpl = self._templates.get(rel)
        if tpl is None:
            tpl = self.pieces(rel)
            if any(ACCEPT in target for _, _, target in tpl):
                tpl = ()  # (a byte returns below the shared frames: no template)
            if len(self._templates) >= MERGED_KEPT:
                self._templates.clear()
            self._templates[rel] = tpl
        if not tpl:
            return self.pieces_of(state)
        prefix = lo_st[:p]
        return [(lo, hi, frozenset([prefix + st for st in target])) for lo, hi, target in tpl]

    def _fill_chain(self, state: int, st: tuple) -> None:
        """The row of a one-stack configuration on a state of one byte edge (inside a
        literal), and the rows of the same literal ahead, up to CHAIN_AHEAD bytes, while its
        states have one edge and reach nothing without input: a walk that enters a literal
        goes on along it, and a chain's rows cost far less together than one by one."""
        automaton, edges_of, bare, bc = self.automaton, self.automaton.byte_edges, self.automaton._bare, self._class_of
        head = st[:-1]
        q = st[-1]
        rows: list[int] = [state]
        spans: list[tuple[int, int, int]] = []
        while True:
            ((lo, hi, t),) = edges_of[q]
            target = automaton.closure(head + (t,))
            self._check_stacks(target)
            nxt = self.intern(target)
            spans.append((bc[lo], bc[hi] + 1, nxt))
            if len(rows) >= CHAIN_AHEAD or t not in bare or len(edges_of[t]) != 1 or self.complete[nxt]:
                break
            rows.append(nxt)
            q = t
        table = self.table  # (intern may have grown it)
        table[rows] = DEAD
        for row, (lo, hi, nxt) in zip(rows, spans):
            if hi == lo + 1:
                table[row, lo] = nxt
            else:
                table[row, lo:hi] = nxt
        self.complete[rows] = 1

    def _fill_row_from(self, state: int, parts: tuple[int, ...]) -> None:
        for p in parts:
            if not self.complete[p]:
                self.fill_row(p)
        sub = self.table[list(parts)]
        cells = sub.max(axis=0)  # (DEAD where no part goes on, the one target where one does)
        several = np.flatnonzero((sub != DEAD).sum(axis=0) > 1)
        if len(several):
            # (the columns repeat: classes that every part treats alike; one union per distinct one)
            by_column: dict[tuple[int, ...], int] = {}
            ids = []
            for col in map(tuple, sub[:, several].T.tolist()):
                cid = by_column.get(col)
                if cid is None:
                    cid = by_column[col] = self.union([x for x in col if x != DEAD])
                ids.append(cid)
            cells[several] = ids
        self.table[state] = cells  # (union may have grown the table)
        self.complete[state] = 1

    def row(self, state: int) -> np.ndarray:
        """The whole row of a configuration, filled."""
        if not self.complete[state] and (self.table[state] == UNKNOWN).any():
            self.fill_row(state)
        return self.table[state]

    def get(self, state: int, cls: int) -> int:
        nxt = int(self.table[state, cls])
        if nxt == UNKNOWN:
            nxt = self._fill_cell(state, cls)
        return nxt

    def next(self, states: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """The configuration ids after one byte of each class, from each state (vectorized)."""
        nxt = self.table[states, classes]
        unknown = nxt == UNKNOWN
        if unknown.any():
            self.fill_rows(states[unknown].tolist())
            nxt = self.table[states, classes]
        return nxt

    def next_from(self, state: int, classes: np.ndarray) -> np.ndarray:
        """Like `next` with one state for every class."""
        row = self.table[state]
        nxt = row[classes]
        if (nxt == UNKNOWN).any():
            self.fill_row(state)
            nxt = self.table[state][classes]
        return nxt

    def step_bytes(self, cid: int, data: bytes) -> int:
        for b in data:
            if cid == DEAD:
                return DEAD
            cid = self.get(cid, int(self.byte_class[b]))
        return cid

    # ------------------------------------------------------------ persistence (data only)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Configurations as flat int arrays, plus the filled part of the table."""
        n_stacks, lengths, states = [], [], []
        for config in self.configs:
            stacks = sorted(config)
            n_stacks.append(len(stacks))
            for st in stacks:
                lengths.append(len(st))
                states.extend(st)
        return {
            "n_stacks": np.asarray(n_stacks, dtype=np.int64),
            "stack_lengths": np.asarray(lengths, dtype=np.int64),
            "stack_states": np.asarray(states, dtype=np.int64),
            "table": np.ascontiguousarray(self.table[: len(self.configs)]),
        }

    def load_arrays(self, arrays: dict[str, np.ndarray], keep: tuple[int, Config] | None = None) -> None:
        """Replace the configurations and table by saved ones (ValueError when inconsistent,
        or when `keep` = (id, configuration) does not hold in them; then nothing changes)."""
        n_stacks = arrays["n_stacks"].tolist()
        lengths = arrays["stack_lengths"].tolist()
        states = arrays["stack_states"].tolist()
        table = np.asarray(arrays["table"], dtype=np.int32)
        n = len(n_stacks)
        if sum(n_stacks) != len(lengths) or sum(lengths) != len(states) or table.shape != (n, self.n_classes):
            raise ValueError("saved configurations do not fit together")
        if n == 0 or n_stacks[0] != 0 or (table < UNKNOWN).any() or (table >= n).any():
            raise ValueError("saved table out of range")
        n_states = len(self.automaton.eps)
        if states and (min(states) < 0 or max(states) >= n_states):
            raise ValueError("saved configuration names an unknown automaton state")
        configs: list[Config] = []
        k = j = 0
        for count in n_stacks:
            stacks = []
            for _ in range(count):
                stacks.append(tuple(states[j : j + lengths[k]]))
                j += lengths[k]
                k += 1
            configs.append(frozenset(stacks))
        ids = {c: i for i, c in enumerate(configs)}
        if len(ids) != n:
            raise ValueError("saved configurations repeat")
        if keep is not None and (keep[0] >= n or configs[keep[0]] != keep[1]):
            raise ValueError("saved configurations belong to another grammar")
        self.configs[:] = configs
        self.ids = ids
        for by_id in (self._merged, self.parts, self._unions):
            by_id.clear()  # (the ids were just renumbered)
        size = table_rows(self.n_classes, 1 << (n - 1).bit_length())
        self.table = fresh_pages((size, self.n_classes), np.int32)  # (as in __init__)
        self.table[:n] = table
        self.accept = np.zeros(size, dtype=bool)
        self.accept[:n] = [ACCEPT in c for c in configs]
        self.complete = np.zeros(size, dtype=np.int8)
        self.canon = np.zeros(size, dtype=np.int32)
        if len(self.part_count):  # (the parts were just forgotten)
            self.part_start = np.zeros(size, dtype=np.int64)
            self.part_count = np.zeros(size, dtype=np.int64)
        self._n_part_ids = 0
        for cid in range(n):
            self.canon[cid] = self._image(cid)
