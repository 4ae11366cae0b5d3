"""Walks of a token trie through the transition table: compiled (kernel.py, native.py)
or vectorized with numpy, with the same results.

A walk starts from a set of trie nodes, all in one configuration, and goes down the
trie a level of bytes at a time, keeping only nodes whose configuration is alive.
It reports the tokens that end at a live node and the live nodes where the
configuration holds ACCEPT (for a relative configuration: its bottom frame can
return there, so the rest of the token belongs to the frames below; compile.py).
The compiled walk may split a node's subtree among the parts of its configuration when
that is a union (Transitions.parts): a token is legal when some part takes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ministruct.engine import kernel
from ministruct.engine.table import CELLS_MIN_STACKS, DEAD, Transitions
from ministruct.engine.trie import PRE_NODE, TokenTrie, expand_children

# off: walks never split a union's subtree among its parts (walk's `forks`; for tests)
FORKS = True
FIRST_ROOM = 64  # the compiled walk's first room for exits, blocked nodes and the like (they grow)
_EMPTY_IDS = np.zeros(0, dtype=np.int32)
_EMPTY_NODES = np.zeros(0, dtype=np.int64)
# stand-ins for absent arguments, with the write flags of the real ones (the compiled walk
# is specialized on them: trie and slice arrays are read-only, per-grammar ones are not)
_NO_TARGETS = np.zeros(0, dtype=np.int32)
_NO_BOOL = np.zeros(0, dtype=bool)
_NO_BOOL_RO = np.zeros(0, dtype=bool)
_NO_U64_RO = np.zeros(0, dtype=np.uint64)
_NO_I8 = np.zeros(0, dtype=np.int8)
_NO_BOOL_RO.setflags(write=False)
_NO_U64_RO.setflags(write=False)


@dataclass(frozen=True)
class Pruner:
    """Cut the walk below nodes whose configuration a slice decides for good.

    `stable(states)` says, per configuration id, whether every character of the slice
    keeps it alive and in configurations that do the same, for ever (compile.py); below
    such a node at depth d, the tokens whose bytes from d on are whole slice characters
    are legal, and when no longer token there is anything else (`need_walk` false) the
    walk stops at the node.
    """

    need_walk: np.ndarray
    suffix_ok: np.ndarray
    stable: Callable[[np.ndarray], np.ndarray]
    max_depth: int
    min_tokens: int  # below smaller subtrees walking is cheaper than asking `stable`
    one_byte: np.ndarray  # bool per byte: a one-byte character of the slice
    known: Callable[[], np.ndarray]  # int8 per configuration id: 1/0 what `stable` said, -1 not asked yet


@dataclass(frozen=True)
class WalkResult:
    """Tokens a walk found legal, and the live nodes where its bottom frame may return."""

    trie: TokenTrie
    ids: np.ndarray  # int32 token ids (twins of duplicate tokens not included; a compiled walk may repeat some)
    exits: np.ndarray  # int64 node ids of `trie`

    @property
    def nbytes(self) -> int:
        return self.ids.nbytes + self.exits.nbytes


def walk(
    trie: TokenTrie,
    byte_class: np.ndarray,
    tr: Transitions,
    start_nodes: np.ndarray,
    state: int,
    targets: np.ndarray | None = None,
    prune: Pruner | None = None,
    *,
    compiled: bool | None = None,
    forks: bool = False,
) -> WalkResult:
    """Walk below `start_nodes` from configuration `state`.

    With `targets`, also write each legal token's end configuration into it. With
    `prune` (only from the root: every node of a step is at the same depth), stop below
    nodes a slice decides. `compiled` picks the compiled walk (kernel.py) or the numpy
    one; by default the compiled one once kernel.py has loaded it. Both give the same result.
    Without `targets`, configurations reached inside a token are replaced by their images
    in a representative repeat copy (`Transitions.canon`): fewer of them to fill. With
    `forks` (and without `targets`), the compiled walk goes on below a union configuration
    whose row is not filled from each of its parts instead (native.walk_kernel).
    """
    if compiled is None:
        compiled = kernel.wanted()
    if compiled:
        return _walk_compiled(trie, byte_class, tr, start_nodes, state, targets, prune, forks)
    t0 = time.perf_counter()
    found = _walk_numpy(trie, byte_class, tr, start_nodes, state, targets, prune)
    kernel.spent(time.perf_counter() - t0)
    return found


def _walk_compiled(
    trie: TokenTrie,
    byte_class: np.ndarray,
    tr: Transitions,
    start_nodes: np.ndarray,
    state: int,
    targets: np.ndarray | None,
    prune: Pruner | None,
    forks: bool,
) -> WalkResult:
    nodes = np.asarray(start_nodes, dtype=np.int64)
    if len(nodes) == 1 and nodes[0] == 0 and not tr.complete[state]:
        tr.row(state)  # the root's children need (nearly) all of it: no round trip for that
    entries = np.zeros((3, len(nodes)), dtype=np.int64)  # node, configuration, covered
    entries[0] = nodes
    entries[1] = state
    use_targets = targets is not None
    out_targets = targets if use_targets else _NO_TARGETS
    if prune is not None:
        need_walk, suffix_ok, max_depth, min_tokens, one_byte = (
            prune.need_walk,
            prune.suffix_ok,
            prune.max_depth,
            prune.min_tokens,
            prune.one_byte,
        )
    else:
        need_walk, suffix_ok, max_depth, min_tokens, one_byte = _NO_BOOL_RO, _NO_U64_RO, 0, 0, _NO_BOOL
    found: list[np.ndarray] = []
    exits: list[np.ndarray] = []
    # the argument types: fixed dtypes, and write flags set by the trie's and the slice's
    # owners (read-only once cached) and by the stand-ins used
    key = (trie.pre.flags.writeable, need_walk.flags.writeable, use_targets, prune is None)
    from_pre = False  # the first entries are node ids, later ones the kernel's own rows
    forks = forks and FORKS and not use_targets  # (a token's end configuration is the whole union's)
    forked = False
    while entries.shape[1]:
        stable = prune.known() if prune is not None else _NO_I8
        buf, n_ids, n_exits, n_blocked, n_wants, n_asks, n_forks = kernel.call(
            key,
            (
                trie.pre,
                trie.node_pre,
                trie.child_start,
                trie.child_count,
                trie.node_byte,
                trie.tok_lo,
                trie.tok_count,
                trie.sorted_ids,
                byte_class,
                tr.table,
                tr.accept,
                tr.complete,
                entries,
                from_pre,
                out_targets,
                use_targets,
                tr.canon,
                not use_targets and bool(tr.canon_map),
                prune is not None,
                need_walk,
                suffix_ok,
                stable,
                max_depth,
                min_tokens,
                one_byte,
                tr.part_start,
                tr.part_count,
                tr.part_ids,
                forks,
                trie.max_len + 1,
                FIRST_ROOM,
            ),
        )
        from_pre = True
        if n_ids:
            found.append(buf[:n_ids])
        o = n_ids + n_exits
        if n_exits:
            exits.append(buf[n_ids:o])
        entries = buf[o : o + 3 * n_blocked].reshape(3, n_blocked)
        o += 3 * n_blocked
        forked = forked or n_forks > 0
        if n_blocked and not (n_wants or n_asks or n_forks):  # cannot happen; never loop for ever
            raise RuntimeError("the compiled walk stopped with nothing to learn")
        if n_asks and prune is not None:
            prune.stable(np.unique(buf[o + n_wants : o + n_wants + n_asks]))
        if n_wants:
            _fill_wanted(trie, byte_class, tr, buf[o : o + n_wants], entries)
    ids = np.concatenate(found, dtype=np.int32, casting="unsafe") if found else _EMPTY_IDS  # (token ids fit)
    out = np.concatenate(exits) if exits else _EMPTY_NODES
    if forked and len(out) > 1:
        out = np.unique(out)  # (parts of a union may exit at the same node)
    return WalkResult(trie, ids, out)


def _fill_wanted(
    trie: TokenTrie, byte_class: np.ndarray, tr: Transitions, wants: np.ndarray, blocked: np.ndarray
) -> None:
    """Fill what the compiled walk asked for: whole rows, except for configurations of
    many stacks, of which only the cells their blocked nodes (rows of `trie.pre`) need
    for their children are filled (`Transitions.fill_cells`)."""
    configs, states = tr.configs, wants.tolist()  # (a few: Python beats numpy's set operations)
    wide = [s for s in states if len(configs[s]) >= CELLS_MIN_STACKS]
    if tr.greedy:  # lexemes that may end: their row needs the whole row after they end, a cell only its cell
        has_markers = tr.automaton.has_markers
        wide += [s for s in states if len(configs[s]) < CELLS_MIN_STACKS and has_markers(configs[s])]
    if len(wide) < len(states):
        tr.fill_rows([s for s in states if s not in wide] if wide else states)
    if not wide:
        return
    if len(wide) > 8:
        mark = np.zeros(len(configs), dtype=bool)
        mark[wide] = True
        wanted = mark[blocked[1]]
    else:
        wanted = blocked[1] == wide[0]
        for s in wide[1:]:
            wanted |= blocked[1] == s
    nodes = trie.pre[blocked[0][wanted], PRE_NODE].astype(np.int64)
    counts = trie.child_count[nodes]
    idx = expand_children(trie.child_start[nodes], counts)
    tr.fill_cells(np.repeat(blocked[1][wanted], counts), byte_class[trie.node_byte[idx]])


def _walk_numpy(
    trie: TokenTrie,
    byte_class: np.ndarray,
    tr: Transitions,
    start_nodes: np.ndarray,
    state: int,
    targets: np.ndarray | None = None,
    prune: Pruner | None = None,
) -> WalkResult:
    found: list[np.ndarray] = []
    exits: list[np.ndarray] = []
    nodes = np.asarray(start_nodes, dtype=np.int64)
    states: np.ndarray | None = None  # None: every node is in `state`
    child_start, child_count = trie.child_start, trie.child_count
    node_byte, node_token = trie.node_byte, trie.node_token
    accept = tr.accept
    depth = 0
    covered: np.ndarray | None = None  # per node: its slice tokens were taken higher up
    while len(nodes):
        counts = child_count[nodes]
        idx = expand_children(child_start[nodes], counts)
        if not len(idx):
            break
        cls = byte_class[node_byte[idx]]
        if states is None:
            nxt = tr.next_from(state, cls)
        else:
            nxt = tr.next(np.repeat(states, counts), cls)
        accept = tr.accept  # the table may have grown
        live = nxt != DEAD
        nodes = idx[live]
        states = nxt[live].astype(np.int64)
        if targets is None and tr.canon_map:  # the same tokens continue from a configuration's image
            states = tr.canon[states].astype(np.int64)
        if not len(nodes):
            break
        tok = node_token[nodes]
        ends = tok >= 0
        if ends.any():
            found.append(tok[ends])
            if targets is not None:
                targets[tok[ends]] = states[ends]
        acc = accept[states]
        if acc.any():
            exits.append(nodes[acc])
        depth += 1
        if prune is not None:
            if covered is None:
                covered = np.zeros(len(nodes), dtype=bool)
            else:
                # coverage passes only through one-byte slice characters: then a tail of
                # slice characters from here is one from where the tokens were taken
                covered = np.repeat(covered, counts)[live] & prune.one_byte[node_byte[nodes]]
            if depth < prune.max_depth:
                covered, keep = _cut(trie, prune, nodes, states, covered, depth, found)
                if keep is not None:
                    nodes, states, covered = nodes[keep], states[keep], covered[keep]
                    if not len(nodes):
                        break
        first = int(states[0])
        if (states == first).all():
            state, states = first, None
    ids = np.concatenate(found).astype(np.int32, copy=False) if found else _EMPTY_IDS
    out = np.concatenate(exits) if exits else _EMPTY_NODES
    return WalkResult(trie, ids, out)


def _cut(
    trie: TokenTrie,
    prune: Pruner,
    nodes: np.ndarray,
    states: np.ndarray,
    covered: np.ndarray,
    depth: int,
    found: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray | None]:
    """Take the slice tails below stable nodes (once per subtree) and drop the nodes below
    which nothing else is. Returns (covered, the nodes to keep or None for all)."""
    ask = covered | (trie.tok_count[nodes] >= prune.min_tokens)
    if not ask.any():
        return covered, None
    stable = np.zeros(len(nodes), dtype=bool)
    stable[ask] = prune.stable(states[ask])
    take = stable & ~covered
    if take.any():
        below = expand_children(trie.tok_lo[nodes[take]], trie.tok_count[nodes[take]])
        whole = ((prune.suffix_ok[below] >> np.uint64(depth)) & np.uint64(1)).astype(bool)
        found.append(trie.sorted_ids[below[whole]])
        covered = covered | take
    done = stable & ~prune.need_walk[nodes]
    # a covered node that is not stable (a character left the slice) must be walked in full
    covered = covered & stable
    return covered, (~done if done.any() else None)
