"""numba-compiled loops of the engine (imported only through kernel.py, which sets the
on-disk cache folder first and falls back to numpy when numba is missing)."""

import numba
import numpy as np

from ministruct.engine.table import UNKNOWN


@numba.njit(cache=True, nogil=True)
def grow(a: np.ndarray, need: int) -> np.ndarray:
    """`a`, or a copy with room for at least `need` items (doubling)."""
    if need <= len(a):
        return a
    b = np.empty(max(need, 2 * len(a)), dtype=a.dtype)
    b[: len(a)] = a
    return b


@numba.njit(cache=True, nogil=True)
def row_known(table, complete, s, byte_class, node_byte, lo, hi):
    """Are the cells this node's children need known? (`complete[s]` caches whole rows.)"""
    if s < len(complete) and complete[s]:
        return True
    if s >= table.shape[0]:
        return False
    whole = True
    for c in range(table.shape[1]):
        if table[s, c] == UNKNOWN:
            whole = False
            break
    if whole:
        if s < len(complete):
            complete[s] = 1
        return True
    for c in range(lo, hi):
        if table[s, byte_class[node_byte[c]]] == UNKNOWN:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def walk_kernel(
    child_start,
    child_count,
    node_byte,
    node_token,
    tok_lo,
    tok_count,
    sorted_ids,
    byte_class,
    table,
    accept,
    complete,
    e_node,
    e_state,
    e_cov,
    e_depth,
    targets,
    use_targets,
    canon,
    use_canon,
    use_prune,
    need_walk,
    suffix_ok,
    stable,
    max_depth,
    min_tokens,
    one_byte,
):
    """walk.py's walk, level by level (node ids grow with depth: memory is read in order).

    With use_canon, a configuration reached inside a token is replaced by canon[it] (the
    same tokens continue from both). Returns (token ids, exit nodes, the blocked entries:
    node, state, covered, depth, and what they wait for: the unknown cells as
    state * n_classes + class, and the configurations whose slice stability is not known),
    each a view of a buffer of this call: the caller copies or consumes them)."""
    n = len(e_node)
    cur_node = e_node.copy()
    cur_state = e_state.copy()
    cur_cov = e_cov.copy()
    cur_depth = e_depth.copy()
    cap = max(64, n)
    nxt_node = np.empty(cap, np.int64)
    nxt_state = np.empty(cap, np.int64)
    nxt_cov = np.empty(cap, np.bool_)
    nxt_depth = np.empty(cap, np.int64)
    ids = np.empty(256, np.int32)
    n_ids = 0
    exits = np.empty(64, np.int64)
    n_exits = 0
    b_node = np.empty(16, np.int64)
    b_state = np.empty(16, np.int64)
    b_cov = np.empty(16, np.bool_)
    b_depth = np.empty(16, np.int64)
    n_blocked = 0
    cells = np.empty(16, np.int64)
    n_cells = 0
    asks = np.empty(16, np.int64)
    n_asks = 0
    n_cls = table.shape[1]
    n_stable = len(stable)
    n_complete = len(complete)
    while n > 0:
        # room for this level, so the loop below never grows an array
        room = 0
        for i in range(n):
            node = cur_node[i]
            room += child_count[node]
            if use_prune and not cur_cov[i] and cur_depth[i] >= 1 and cur_depth[i] < max_depth:
                s = cur_state[i]
                if tok_count[node] >= min_tokens and s < n_stable and stable[s] == 1:
                    room += tok_count[node]
        if room > len(nxt_node):
            nxt_node = grow(nxt_node, room)
            nxt_state = grow(nxt_state, room)
            nxt_cov = grow(nxt_cov, room)
            nxt_depth = grow(nxt_depth, room)
        ids = grow(ids, n_ids + room)
        exits = grow(exits, n_exits + room)
        b_node = grow(b_node, n_blocked + n)
        b_state = grow(b_state, n_blocked + n)
        b_cov = grow(b_cov, n_blocked + n)
        b_depth = grow(b_depth, n_blocked + n)
        asks = grow(asks, n_asks + n)
        cells = grow(cells, n_cells + room)
        m = 0
        for i in range(n):
            node = cur_node[i]
            s = cur_state[i]
            cov = cur_cov[i]
            depth = cur_depth[i]
            lo = child_start[node]
            hi = lo + child_count[node]
            ask = False
            if use_prune and depth >= 1 and depth < max_depth:
                ask = cov or tok_count[node] >= min_tokens
            blocked = ask and (s >= n_stable or stable[s] < 0)
            if blocked:
                asks[n_asks] = s
                n_asks += 1
            elif hi > lo and not (s < n_complete and complete[s] == 1):
                if not row_known(table, complete, s, byte_class, node_byte, lo, hi):
                    blocked = True
                    for c in range(lo, hi if s < table.shape[0] else lo):  # (a row past the table: a bug)
                        k = byte_class[node_byte[c]]
                        if table[s, k] == UNKNOWN:
                            cells[n_cells] = s * n_cls + k
                            n_cells += 1
            if blocked:
                b_node[n_blocked] = node
                b_state[n_blocked] = s
                b_cov[n_blocked] = cov
                b_depth[n_blocked] = depth
                n_blocked += 1
                continue
            if ask:
                if stable[s] == 1:
                    if not cov:
                        a = tok_lo[node]
                        bit = np.uint64(1) << np.uint64(depth)
                        for k in range(a, a + tok_count[node]):
                            if suffix_ok[k] & bit:
                                ids[n_ids] = sorted_ids[k]
                                n_ids += 1
                    cov = True
                    if not need_walk[node]:
                        continue
                else:
                    cov = False
            for c in range(lo, hi):
                t = table[s, byte_class[node_byte[c]]]
                if t <= 0:
                    continue
                tok = node_token[c]
                if tok >= 0:
                    ids[n_ids] = tok
                    n_ids += 1
                    if use_targets:
                        targets[tok] = t
                if accept[t]:
                    exits[n_exits] = c
                    n_exits += 1
                if child_count[c] == 0:
                    continue  # a leaf: nothing below it to walk (its token, if taken again, would repeat)
                nxt_node[m] = c
                nxt_state[m] = canon[t] if use_canon else t
                nxt_cov[m] = cov and one_byte[node_byte[c]]
                nxt_depth[m] = depth + 1
                m += 1
        cur_node, nxt_node = nxt_node, cur_node
        cur_state, nxt_state = nxt_state, cur_state
        cur_cov, nxt_cov = nxt_cov, cur_cov
        cur_depth, nxt_depth = nxt_depth, cur_depth
        n = m
    return (
        ids[:n_ids],
        exits[:n_exits],
        b_node[:n_blocked],
        b_state[:n_blocked],
        b_cov[:n_blocked],
        b_depth[:n_blocked],
        cells[:n_cells],
        asks[:n_asks],
    )
