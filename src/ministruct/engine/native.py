"""numba-compiled loops of the engine (imported only through kernel.py, which sets the
on-disk cache folder first and falls back to numpy when numba is missing)."""

import numba
import numpy as np

from ministruct.engine.table import MAX_PARTS, UNKNOWN
from ministruct.engine.trie import PRE_DEPTH_BYTE, PRE_NODE, PRE_SIZE, PRE_TOKEN


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
    """Are the cells this node's children need known? (`complete[s]` == 1 caches whole rows.)"""
    if s < len(complete) and complete[s] == 1:
        return True
    if s >= table.shape[0]:
        return False
    for c in range(lo, hi):
        if table[s, byte_class[node_byte[c]]] == UNKNOWN:
            return False
    # (the children's cells are known; the whole row is scanned to remember it only when
    # its node has many children: a row filled cell by cell, as greedy lexemes' rows are,
    # was scanned again at every node of its configuration)
    if hi - lo >= 8:
        for c in range(table.shape[1]):
            if table[s, c] == UNKNOWN:
                return True
        if s < len(complete):
            complete[s] = 1
    return True


FULL = 1  # _walk_rows stopped: an output array may not hold the next node's output
ASKED = 2  # `complete` of a row asked for in this call (walk_kernel resets it)


@numba.njit(cache=True, nogil=True)
def _walk_rows(
    pos,
    st,
    cv,
    pre,
    node_pre,
    child_start,
    child_count,
    node_byte,
    tok_lo,
    tok_count,
    sorted_ids,
    byte_class,
    table,
    accept,
    complete,
    entries,
    from_pre,
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
    part_start,
    part_count,
    part_ids,
    use_forks,
    ids,
    exits,
    blocked,
    wants,
    asks,
    tails,
    counts,
):
    """walk_kernel's loop, from `pos` (entry, row, end of its subtree, how to go on:
    0 at the row, 1 from the entry, 2 at the row's checks; then the row's configuration
    and coverage). Returns 0 when done, FULL when an output array other than `ids` may
    not hold the next row's output; `pos` and `counts` then say where it stopped."""
    n_rows = table.shape[0]
    n_stable = len(stable)
    n_complete = len(complete)
    n_ids, n_exits, n_blocked, n_wants, n_asks, n_tails, n_forks = (
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5],
        counts[6],
    )
    n_parted = len(part_count)
    e, i, end, fresh = pos[0], pos[1], pos[2], pos[3]
    ns = pos[4]
    cov = pos[5] != 0
    status = 0
    while e < entries.shape[1]:
        if fresh == 2:  # back to a node's check
            check = True
            fresh = 0
        elif fresh:
            i = entries[0, e]
            if not from_pre:
                i = node_pre[i]
            end = i + pre[i, PRE_SIZE]
            ns = entries[1, e]
            cov = entries[2, e] != 0
            check = True
            fresh = 0
        else:
            check = False
        while True:
            if not check:
                if i >= end:
                    break
                word = pre[i, PRE_DEPTH_BYTE]
                d = word >> 8
                t = table[st[d - 1], byte_class[word & 255]]  # (known: the parent's row was checked)
                if t <= 0:
                    i += pre[i, PRE_SIZE]
                    continue
                if accept[t]:
                    if n_exits == len(exits):
                        status = FULL  # (come back to this node)
                        break
                    exits[n_exits] = pre[i, PRE_NODE]
                    n_exits += 1
                tok = pre[i, PRE_TOKEN]
                ids[n_ids] = tok
                n_ids += tok >= 0
                if use_targets and tok >= 0:
                    targets[tok] = t
                ns = canon[t] if use_canon else t
                if not use_prune:
                    if ns < n_complete and complete[ns] == 1:
                        st[d] = ns  # (a leaf's too: no node reads it)
                        i += 1
                        continue
                    cov = False
                else:
                    cov = cv[d - 1] and one_byte[word & 255]
                    asked = d < max_depth and (cov or tok_count[pre[i, PRE_NODE]] >= min_tokens)
                    if not asked and ns < n_complete and complete[ns] == 1:
                        st[d] = ns
                        cv[d] = cov
                        i += 1
                        continue
            check = False
            # the node's own checks, before its subtree (as walk.py's numpy walk makes them)
            d = pre[i, PRE_DEPTH_BYTE] >> 8
            size = pre[i, PRE_SIZE]
            node = pre[i, PRE_NODE]
            if size == 1:
                i += 1  # a leaf: nothing below it to walk or check
                continue
            if (
                n_blocked + MAX_PARTS > blocked.shape[1]
                or n_wants == len(wants)
                or n_asks == len(asks)
                or (use_prune and n_tails + tok_count[node] > len(tails))
            ):
                status = FULL
                check = True  # (come back to this node)
                break
            ask = False
            if use_prune and d >= 1 and d < max_depth:
                ask = cov or tok_count[node] >= min_tokens
            if ask and ns < n_stable and stable[ns] == 1:  # (decided before its row is asked for)
                if not cov:
                    a = tok_lo[node]
                    bit = np.uint64(1) << np.uint64(d)
                    for k in range(a, a + tok_count[node]):
                        if suffix_ok[k] & bit:
                            tails[n_tails] = sorted_ids[k]
                            n_tails += 1
                cov = True
                if not need_walk[node]:
                    i += size
                    continue
            stop = ask and (ns >= n_stable or stable[ns] < 0)
            if stop:
                asks[n_asks] = ns
                n_asks += 1
            elif not (ns < n_complete and complete[ns] == 1):
                lo = child_start[node]
                hi = lo + child_count[node]
                if ns < n_complete and complete[ns] == ASKED:
                    stop = True  # (asked for already: its row is being filled whole)
                elif not row_known(table, complete, ns, byte_class, node_byte, lo, hi):
                    if use_forks and ns < n_parted and part_count[ns] > 0:
                        # a union of smaller configurations: walk the subtree from each of
                        # them instead of filling the union's row (entries, like blocked nodes)
                        keep = cov and not (ask and stable[ns] != 1)  # (as below, for a row that is known)
                        for k in range(part_start[ns], part_start[ns] + part_count[ns]):
                            blocked[0, n_blocked] = i
                            blocked[1, n_blocked] = part_ids[k]
                            blocked[2, n_blocked] = keep
                            n_blocked += 1
                        n_forks += 1
                        i += size
                        continue
                    stop = True
                    if ns < n_rows:  # (a row past the table: a bug)
                        complete[ns] = ASKED
                        wants[n_wants] = ns
                        n_wants += 1
            if stop:
                blocked[0, n_blocked] = i
                blocked[1, n_blocked] = ns
                blocked[2, n_blocked] = cov
                n_blocked += 1
                i += size
                continue
            if ask and stable[ns] != 1:
                cov = False
            st[d] = ns
            cv[d] = cov
            i += 1
        if status:
            break
        e += 1
        fresh = 1
    counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6] = (
        n_ids,
        n_exits,
        n_blocked,
        n_wants,
        n_asks,
        n_tails,
        n_forks,
    )
    pos[0], pos[1], pos[2], pos[3], pos[4], pos[5] = e, i, end, 2 if check else fresh, ns, cov
    return status


@numba.njit(cache=True, nogil=True)
def walk_kernel(
    pre,
    node_pre,
    child_start,
    child_count,
    node_byte,
    tok_lo,
    tok_count,
    sorted_ids,
    byte_class,
    table,
    accept,
    complete,
    entries,
    from_pre,
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
    part_start,
    part_count,
    part_ids,
    use_forks,
    levels,
    room,
):
    """walk.py's walk, depth first over the trie's preorder rows: a dead node skips its
    subtree in one step, and memory is read in order.

    `entries` (3, n): node, configuration, covered; nodes are rows of `pre` with
    from_pre, node ids otherwise. Each node is checked as the numpy walk checks it (its
    slice stability with use_prune, its row of the table), then its subtree is walked.
    With use_canon, a configuration reached inside a token is replaced by canon[it] (the
    same tokens continue from both). `levels`: the trie's depth + 1; `room` (>= 1): the
    first size of the output arrays but the token ids' (they grow). With use_forks, a
    node in a configuration with parts (Transitions.parts) whose row is not known is not
    waited for: its subtree is handed back as blocked entries, one per part (a token is
    legal when some part takes it; tokens and exits may then come more than once).
    Returns (buffer, n_ids, n_exits, n_blocked, n_wants, n_asks, n_forks); the buffer holds, in that order, the
    token ids, the exit node ids, the blocked entries (3 x n_blocked, rows of `pre`, to
    walk on from), the configurations whose table rows they wait for (each once) and the
    configurations whose slice stability is not known."""
    found = 0  # each token below the entries is found at most once per entry: room for all of them
    for e in range(entries.shape[1]):
        found += tok_count[pre[node_pre[entries[0, e]] if not from_pre else entries[0, e], PRE_NODE]]
    ids = np.empty(found, np.int64)
    exits = np.empty(room, np.int64)
    blocked = np.empty((3, room), np.int64)
    wants = np.empty(room, np.int64)
    asks = np.empty(room, np.int64)
    tails = np.empty(room if use_prune else 0, np.int64)
    counts = np.zeros(7, np.int64)
    pos = np.zeros(6, np.int64)
    pos[3] = 1
    st = np.empty(levels, np.int64)
    cv = np.empty(levels, np.bool_)
    while _walk_rows(
        pos,
        st,
        cv,
        pre,
        node_pre,
        child_start,
        child_count,
        node_byte,
        tok_lo,
        tok_count,
        sorted_ids,
        byte_class,
        table,
        accept,
        complete,
        entries,
        from_pre,
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
        part_start,
        part_count,
        part_ids,
        use_forks,
        ids,
        exits,
        blocked,
        wants,
        asks,
        tails,
        counts,
    ):
        exits = grow(exits, counts[1] + 1)
        if counts[2] + MAX_PARTS > blocked.shape[1]:
            b2 = np.empty((3, max(2 * blocked.shape[1], counts[2] + MAX_PARTS)), np.int64)
            b2[:, : counts[2]] = blocked[:, : counts[2]]
            blocked = b2
        wants = grow(wants, counts[3] + 1)
        asks = grow(asks, counts[4] + 1)
        tails = grow(tails, counts[5] + tok_count[pre[pos[1], PRE_NODE]] + 1)
    n_ids, n_exits, n_blocked, n_wants, n_asks, n_tails, n_forks = (
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5],
        counts[6],
    )
    out = np.empty(n_ids + n_tails + n_exits + 3 * n_blocked + n_wants + n_asks, np.int64)
    out[:n_ids] = ids[:n_ids]
    out[n_ids : n_ids + n_tails] = tails[:n_tails]
    n_ids += n_tails
    o = n_ids
    out[o : o + n_exits] = exits[:n_exits]
    o += n_exits
    for r in range(3):
        out[o : o + n_blocked] = blocked[r, :n_blocked]
        o += n_blocked
    out[o : o + n_wants] = wants[:n_wants]
    o += n_wants
    for k in range(n_wants):
        complete[wants[k]] = 0
    out[o : o + n_asks] = asks[:n_asks]
    return out, n_ids, n_exits, n_blocked, n_wants, n_asks, n_forks
