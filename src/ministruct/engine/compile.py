"""Grammar x Vocabulary -> CompiledGrammar: legal-token masks per parser configuration.

Parser configurations (automaton.py) are interned to small integers with a byte-class
transition table that fills itself on demand (table.py). Compiling builds the automaton,
its byte classes and what holds for the whole grammar (which vocabulary slice cuts its
walks: prune.py); the vocabulary's trie and slices are loaded once per process
(slices.py), and everything else is computed when first asked.

A mask is not one walk per configuration. A configuration is split into a *base*, the
return points every stack shares, and a *relative* configuration, the stacks above the
base (mask_walks.py). Tokens are walked from the relative configuration alone (walk.py): those it
consumes whole are legal whatever the base; the nodes where its bottom frame can
return are *exits*, and the rest of those tokens is walked from the configuration the
base returns to, split the same way, and so on down. Each walk is cached under
(where it starts, relative configuration), so configurations that differ only in what
lies below (nesting depth, which caller) share their walks, and a new configuration
mostly costs a few cache lookups. Where every character of a vocabulary slice keeps a
relative configuration on one chain, the slice's tokens are taken by length and only
the rest of the vocabulary is walked. A configuration kept as a union of smaller ones
(table.py's parts) gets the union of their masks: inside a name of an ambiguous grammar,
each character's configuration is the same big one plus a few keyword prefixes, and those
masks are shared by every position instead of walked again. Before the first mask,
`compile_grammar` follows the chains that start in the grammar's repeats once (`warm`: a
bounded string's counts, an e-mail's local part), so the first mask inside each does not.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import numpy as np

from ministruct.engine.automaton import ACCEPT, Automaton, Config, Stack
from ministruct.engine.chains import SliceChains
from ministruct.engine.mask_walks import MaskWalks, WalkPart
from ministruct.engine.pages import fresh_pages
from ministruct.engine.slices import index_for
from ministruct.engine.table import DEAD, Transitions
from ministruct.engine.token_edges import TokenEdges
from ministruct.engine.trie import TokenTrie, copy_duplicates
from ministruct.engine.vocab import Vocabulary
from ministruct.engine.walk import Pruner, walk
from ministruct.errors import CompileLimitError, GrammarError, UsageError
from ministruct.grammar.ir import Grammar, gc_paused

if TYPE_CHECKING:
    from ministruct.grammar.constraint import Constraint

MASK_CACHE_BYTES = 512 * 1024 * 1024
WARM_S = 0.02  # compile time spent following the chains of repeats, at most (warm) ...
WARM_MIN_COPIES = 8  # ... of bounded repeats of at least this many copies, and of loops
CONTENT_KEY_IDS = 4096  # a mask's walks that found more tokens key it by the walks (_content_key)
MAX_UNION_DEPTH = 32  # masks made of the masks of parts, nested at most this deep (then walked)

# masks are rows of chunks of fresh zeroed private pages, touched only where written: a
# mask of a few tokens faults in a few pages, not n_logits / 4096 (Gemma-3: 64, at 2-3 us
# each on this project's machines). No huge pages are asked for: where the system grants
# them it may first compact memory, and a walk then took 78 ms instead of 17 (seen here)
MASK_CHUNK_BYTES = 8 * 1024 * 1024


T = TypeVar("T")


class CompiledGrammar(MaskWalks):
    """A grammar bound to a vocabulary; shared by every Matcher of that pair.

    Concurrency: one CompiledGrammar may be shared by matchers on any number of threads.
    Everything it fills lazily (configurations, transitions, walks, masks, token steps)
    is guarded by one re-entrant lock held for the whole of each public call, so calls
    from different threads take turns and always see a consistent state. Masks are
    returned read-only and may be kept and shared freely.
    """

    def __init__(self, grammar: Grammar, vocab: Vocabulary, automaton: Automaton | None = None) -> None:
        t0 = time.perf_counter()
        self.grammar = grammar
        self.vocab = vocab
        self.automaton = automaton or Automaton(grammar)
        index = index_for(vocab)
        self._index = index
        self.trie: TokenTrie = index.trie
        # greedy lexemes: a step is no union of its stacks' steps, so the slices (which
        # follow chains stack by stack), the parts and the base/relative split are off
        self._slices = {} if self.automaton.greedy else index.slices
        cuts = self.automaton.byte_boundaries()
        self.byte_class = (np.searchsorted(np.asarray(cuts), np.arange(256), side="right") - 1).astype(np.int64)
        self.n_classes = len(cuts) - 1
        class_rep = np.asarray(cuts[:-1], dtype=np.int64)  # one byte standing for each class
        self.transitions = Transitions(self.automaton, self.byte_class, class_rep, grammar.source)
        self.configs: list[Config] = self.transitions.configs
        self._lock = threading.RLock()
        self._companions: dict[str, Any] = {}
        self._saved_companions: dict[str, dict[str, np.ndarray]] = {}  # restored, for companions built later
        self._token_steps: dict[tuple[int, int], int] = {}
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._mask_bytes = 0
        self._packed: dict[int, np.ndarray] = {}  # restored masks not used yet: bit-packed rows
        self._walks: OrderedDict[tuple[int, int], WalkPart] = OrderedDict()
        self._walk_bytes = 0
        self._walk_keys = 0
        self._splits: dict[int, tuple[Stack, int]] = {}
        self._slice_splits: dict[int, tuple[Stack, int]] = {}
        self._returns: dict[Stack, int] = {}
        self._chains: dict[str, SliceChains] = {}
        self._members: dict[tuple, np.ndarray] = {}  # (slice, character set) -> its tokens
        self._members_held: dict[int, tuple[int, np.ndarray]] = {}  # id -> (serial, slice tokens) (_content_key)
        # per open chain's character set: (tokens made of them, tokens starting with one)
        self._open_sizes: dict[tuple, tuple[int, int]] = {}
        self._rent: dict[tuple, float] = {}  # per rest trie not built: seconds walked without it
        self._renting: tuple | None = None  # the rest trie the walk being made goes without
        self._prune: Pruner | None = None
        self.eog = np.asarray(sorted(vocab.eog_ids), dtype=np.int64)
        self.token_edges = TokenEdges(self.automaton, vocab, grammar.source)
        self.transitions.set_canon_map(self.automaton.canonical_states(self.trie.max_len))
        self._composed: OrderedDict[tuple, np.ndarray] = OrderedDict()  # the walks a mask is made of -> the mask
        self._composed_max = max(16, MASK_CACHE_BYTES // max(1, vocab.n_logits))
        self._union_depth = 0
        self._chosen_slice: str | None = None
        self._parts_pay: bool | None = None
        self._chunk = np.zeros((0, vocab.n_logits), dtype=bool)
        self._chunk_used = 0
        self.initial = self.intern(self.automaton.initial)
        self._pruner()  # (the grammar-wide analyses: which slice cuts whole-trie walks, and where)
        self._saved_size = (1, 0, 0)
        self.compile_s = time.perf_counter() - t0

    # ------------------------------------------------------------ disk cache

    def cache_key(self) -> str:
        from ministruct.engine import cache

        return cache.grammar_key(self.grammar, self.vocab.fingerprint)

    def restore(self) -> bool:
        """Load configurations, transitions and masks a previous run saved (False if none)."""
        from ministruct.engine import cache

        with self._lock:
            key = self.cache_key()
            entry = cache.load("grammar", key, mapped=False)
            if entry is None:
                return False
            try:
                ok = self._restore(entry.arrays, entry.meta)
            except (KeyError, TypeError, ValueError):
                ok = False
            if not ok:
                cache.discard("grammar", key)
            return ok

    def _restore(self, arrays: dict[str, np.ndarray], meta: dict) -> bool:
        if meta.get("n_classes") != self.n_classes or meta.get("n_logits") != self.vocab.n_logits:
            return False
        initial = self.configs[self.initial]
        mask_ids = arrays["mask_ids"].tolist()
        packed = arrays["masks"]
        n = len(arrays["n_stacks"])
        if packed.shape != (len(mask_ids), (self.vocab.n_logits + 7) // 8) or any(not 0 < c < n for c in mask_ids):
            raise ValueError("saved masks do not fit")
        self.transitions.load_arrays(arrays, keep=(self.initial, initial))
        self._forget_ids()
        self._masks.clear()
        self._mask_bytes = 0
        # unpacked on first use: a fresh process reads a few of them, and a 262k mask is
        # 64 fresh pages to fault in
        self._packed = dict(zip(mask_ids, packed))
        saved: dict[str, dict[str, np.ndarray]] = {}
        for name, a in arrays.items():
            owner, dot, part = name.partition(".")
            if dot:
                saved.setdefault(owner, {})[part] = a
        self._saved_companions = saved
        self._saved_size = self._learned()
        return True

    def _forget_ids(self) -> None:
        """Drop everything that names configurations by id (they were just renumbered)."""
        for cache in (
            self._token_steps,
            self._walks,
            self._splits,
            self._slice_splits,
            self._returns,
            self._chains,
            self._members,
            self._members_held,
            self._composed,
        ):
            cache.clear()
        self._walk_bytes = 0
        self._prune = None

    def companion(self, name: str, build: Callable[["CompiledGrammar"], T]) -> T:
        """A helper object kept with this grammar (its token budget, its forced bytes),
        built by `build(self)` on first use; one per grammar, whichever thread asks first.

        A companion with `to_arrays()` (name -> array) and `learned()` (how much it has
        learned in this process) is saved with the grammar by `persist()`; what a previous
        run saved for it is `saved_arrays(name)`."""
        companions = self._companions
        found = companions.get(name)
        if found is None:
            with self._lock:
                found = companions.get(name)
                if found is None:
                    found = companions[name] = build(self)
        return found

    def saved_arrays(self, name: str) -> dict[str, np.ndarray]:
        """What the disk cache held for companion `name` (empty when nothing)."""
        return self._saved_companions.get(name, {})

    def _learned(self) -> tuple[int, int, int]:
        counts = sum(c.learned() for c in list(self._companions.values()) if hasattr(c, "learned"))
        return (len(self.configs), len(self._masks) + len(self._packed), counts)

    def persist(self) -> None:
        """Save what this process has learned, if it learned anything new."""
        from ministruct.engine import cache

        size = self._learned()
        if size == self._saved_size:
            return
        # the companions' arrays first, outside this grammar's lock: a companion takes its
        # own lock and then this one (Budget.need), so taking them the other way could deadlock
        extra = {
            f"{name}.{k}": v
            for name, companion in sorted(self._companions.items())
            if hasattr(companion, "to_arrays")
            for k, v in companion.to_arrays().items()
        }
        with self._lock:
            arrays = self.transitions.to_arrays()
            arrays.update(extra)
            ids = list(self._masks) + list(self._packed)
            arrays["mask_ids"] = np.asarray(ids, dtype=np.int64)
            width = (self.vocab.n_logits + 7) // 8
            rows = [np.packbits(m) for m in self._masks.values()] + list(self._packed.values())
            arrays["masks"] = np.stack(rows) if rows else np.zeros((0, width), np.uint8)
            meta = {"n_classes": self.n_classes, "n_logits": self.vocab.n_logits}
            cache.save("grammar", self.cache_key(), arrays, meta)
            self._saved_size = size

    # ------------------------------------------------------------ configurations

    def intern(self, config: Config) -> int:
        """The id of a configuration, allocating a table row for a new one."""
        with self._lock:
            return self.transitions.intern(config)

    def step_bytes(self, cid: int, data: bytes) -> int:
        """The configuration id after some bytes (DEAD when they are not allowed)."""
        with self._lock:
            return self.transitions.step_bytes(cid, data)

    def step_token(self, cid: int, token_id: int) -> int:
        """The configuration id after a whole (non end-of-generation) token."""
        key = (cid, token_id)
        with self._lock:
            hit = self._token_steps.get(key)
            if hit is not None:
                return hit
            nxt = DEAD
            # (as in `mask`: no collection while the step makes configurations; inline,
            # since most steps make none and this runs on every new token)
            enabled, made = gc.isenabled(), len(self.configs)
            if enabled:
                gc.disable()
            try:
                if token_id not in self.vocab.control_ids:
                    data = self.vocab.token_bytes(token_id)
                    if data:
                        nxt = self._step_through_top(cid, data)
                if self.automaton.has_token_edges:
                    extra = self.automaton.step_token_edges(self.configs[cid], token_id, self.token_edges.resolve)
                    if extra:
                        nxt = self.transitions.intern(self.configs[nxt] | extra)
            finally:
                if enabled:
                    if len(self.configs) != made and gc.get_freeze_count() == 0:
                        gc.freeze()  # (what it made joins the oldest generation, as in gc_paused)
                        gc.unfreeze()
                    gc.enable()
            self._token_steps[key] = nxt
            return nxt

    def _step_through_top(self, cid: int, data: bytes) -> int:
        """`Transitions.step_bytes` of a configuration through the rows of its top (the
        relative configuration of the top split, whose rows its mask's walk filled along
        every legal token where no slice decided it): while the top does not return, the
        stacks below only ride along, and the result is the base under the stepped top.
        Where the top may return before the last byte, the rest is stepped from the whole
        configuration."""
        tr = self.transitions
        if self.automaton.greedy or cid == DEAD:
            return tr.step_bytes(cid, data)
        base, rel = self._top_split(cid)  # (without asking the slices)
        if not base:
            return tr.step_bytes(cid, data)
        byte_class, get = self.byte_class, tr.get
        x = rel
        for i, b in enumerate(data):
            x = get(x, int(byte_class[b]))
            if x == DEAD:
                return DEAD
            if tr.accept[x] and i + 1 < len(data):  # (the top may return here: the base goes on; the array grows)
                return tr.step_bytes(self._under(base, x), data[i + 1 :])
        return self._under(base, x)

    def _under(self, base: Stack, rel: int) -> int:
        """The configuration of `base` under the stacks of `rel` (returning into it where
        `rel` holds ACCEPT)."""
        config = self.configs[rel]
        stacks = {base + st for st in config if st}
        if ACCEPT in config:
            stacks |= self.configs[self._return_to(base)]
        return self.transitions.intern(frozenset(stacks))

    def is_accepting(self, cid: int) -> bool:
        return self.automaton.is_accepting(self.configs[cid])

    def is_terminated(self, cid: int) -> bool:
        """Complete, and no token but end-of-generation can follow."""
        return self.automaton.is_terminated(self.configs[cid])

    # ------------------------------------------------------------ masks

    def mask_key(self, cid: int) -> int:
        """The configuration whose mask stands for `cid`'s (itself, or a copy of it that
        sits elsewhere in a long repeat but allows exactly the same tokens)."""
        with self._lock:
            return int(self.transitions.canon[cid])

    def has_mask(self, cid: int) -> bool:
        with self._lock:
            key = self.mask_key(cid)
            return key in self._masks or key in self._packed

    def mask(self, cid: int) -> np.ndarray:
        """Read-only bool array (n_logits): the legal tokens in configuration `cid`."""
        with self._lock:
            cid = int(self.transitions.canon[cid])  # (mask_key)
            hit = self._masks.get(cid)
            if hit is not None:
                self._masks.move_to_end(cid)
                return hit
            bits = self._packed.pop(cid, None)
            if bits is None:
                # (what a mask makes, configurations and rows, lives as long as the grammar:
                # collections that traverse it free nothing, and on a big grammar a full one
                # took 150-300 ms in the middle of a step)
                with gc_paused():
                    m = self._compute_mask(cid)
            else:  # (unpackbits gives bytes of 0 or 1: a bool view)
                m = np.unpackbits(bits, count=self.vocab.n_logits).view(bool)
            if m.flags.writeable:
                m.setflags(write=False)
            self._masks[cid] = m
            self._mask_bytes += m.nbytes
            while self._mask_bytes > MASK_CACHE_BYTES and len(self._masks) > 1:
                _, old = self._masks.popitem(last=False)
                self._mask_bytes -= old.nbytes
            return m

    def _compute_mask(self, cid: int) -> np.ndarray:
        if cid == DEAD:
            return np.zeros(self.vocab.n_logits, dtype=bool)
        union_of = self.transitions.parts.get(cid)
        if union_of is not None and self._union_depth < MAX_UNION_DEPTH and self._by_parts():
            return self._union_mask(union_of)
        parts: list[WalkPart] = []
        parent, at = None, cid
        while True:
            base, rel = self._split(at) if parent is not None else self._slice_split(at)
            part = self._walk_from(parent, rel)
            parts.append(part)
            if not base or not len(part.found.exits):
                break
            parent, at = part, self._return_to(base)
        config = self.configs[cid]
        accepting = self.automaton.is_accepting(config)
        key = None if self.automaton.has_token_edges else self._content_key(accepting, parts)
        if key is not None:
            hit = self._composed.get(key)
            if hit is not None:
                self._composed.move_to_end(key)
                return hit
        legal = self._blank_mask()
        first = parts[0].members  # (only walks from the trie's root take slices)
        if isinstance(first, tuple):
            np.less_equal(*first, out=legal)
        elif first is not None:
            np.copyto(legal, first)
        for part in parts:
            legal[part.found.ids] = True
        copy_duplicates(self.trie, legal)
        if accepting and len(self.eog):
            legal[self.eog] = True
        if self.automaton.has_token_edges:
            self.token_edges.add_to(config, legal)
        if key is not None:
            legal.setflags(write=False)
            self._composed[key] = legal
            if len(self._composed) > self._composed_max:
                self._composed.popitem(last=False)
        return legal

    def _content_key(self, accepting: bool, parts: list[WalkPart]) -> tuple:
        """What a mask is made of, as a key of `_composed`: masks made of the same tokens
        are one array. Configurations that differ only below where any token reaches (a
        deeper nesting, another caller) walk the same parts; other configurations may find
        the same tokens: each character of an e-mail's local part, or of a string bounded
        past the longest slice token, is a configuration of its own, with the same mask
        (a new 262k mask is 64 fresh pages to fault in). Parts that found many tokens are
        named by their walks instead."""
        if sum(len(p.found.ids) for p in parts) > CONTENT_KEY_IDS:
            return (accepting, *(p.key for p in parts))
        first = parts[0].members
        held: tuple | None = None
        if first is not None:
            lengths, limit = first if isinstance(first, tuple) else (first, None)
            # (the array is kept here: its id is not reused for another while this grammar lives)
            serial = self._members_held.setdefault(id(lengths), (len(self._members_held), lengths))[0]
            held = (serial, limit)
        ids = parts[0].found.ids if len(parts) == 1 else np.concatenate([p.found.ids for p in parts])
        return (accepting, held, np.sort(ids).tobytes())  # (walks find tokens in the order they meet them)

    def _union_mask(self, union_of: tuple[int, ...]) -> np.ndarray:
        """The mask of a configuration kept as the union of smaller ones (Transitions.parts):
        a token is legal when some stack can take it, so it is the union of their masks.
        Inside a name, the configuration after each character is the same big one (the
        name goes on, or ends) with a few short keyword prefixes beside it: their masks
        are computed once and shared by every position, not walked again per position."""
        legal = self._blank_mask()
        self._or_parts(legal, union_of)
        return legal

    def _or_parts(self, legal: np.ndarray, union_of: tuple[int, ...]) -> None:
        """Add the masks of these configurations to `legal`; a part that is a union itself
        adds its own parts' unless its mask is known (no mask of its own is made: on
        262k tokens each is 64 fresh pages, and nested unions made most of a Lark
        grammar's masks)."""
        self._union_depth += 1
        try:
            for p in union_of:
                sub = self.transitions.parts.get(p)
                if sub is not None and self._union_depth < MAX_UNION_DEPTH and not self.has_mask(p):
                    self._or_parts(legal, sub)
                else:
                    np.logical_or(legal, self.mask(p), out=legal)
        finally:
            self._union_depth -= 1

    def _blank_mask(self) -> np.ndarray:
        """A new all-False bool array of n_logits, for a mask (see MASK_CHUNK_BYTES)."""
        if self._chunk_used == len(self._chunk):
            n = self.vocab.n_logits
            self._chunk = _zeroed_chunk(max(1, MASK_CHUNK_BYTES // n), n)
            self._chunk_used = 0
        self._chunk_used += 1
        return self._chunk[self._chunk_used - 1]

    def warm(self, budget_s: float | None = None) -> None:
        """Follow, within about `budget_s` (WARM_S by default), the chains that start in the grammar's repeats (a
        string's `maxLength`, a host name's labels, an e-mail's local part), load the token
        sets they take and fill the rows of the bounded ones' counts: the first mask inside
        each would do it in the middle of generation (a chain of 80 characters is 80
        configurations made in Python, a set on 262k tokens 0.5-1.5 ms, the rows a token
        crosses 0.5-1 ms). Only caches are filled: no mask changes. A grammar past the
        engine's limits there is left to fail where generation meets it, if it does."""
        if not self._slices:
            return
        auto, tr = self.automaton, self.transitions
        counted = [b for b, _, _, _, nullable in auto.repeat_blocks if not nullable and len(b) >= WARM_MIN_COPIES]
        end = time.perf_counter() + (WARM_S if budget_s is None else budget_s)
        with self._lock:
            try:
                for q in [b[0] for b in counted] + auto.loop_entries:
                    self._slice_for(tr.intern(auto.closure((q,))))
                    self._renting = None
                    if time.perf_counter() > end:
                        return
                for blocks in counted:
                    tr.fill_rows([tr.intern(auto.closure((q,))) for q in blocks])
                    if time.perf_counter() > end:
                        return
            except (CompileLimitError, GrammarError):
                self._renting = None

    def token_targets(self, cid: int) -> np.ndarray:
        """int32 per logits row: the configuration each ordinary (byte-spelled) token leads
        to from `cid`, DEAD where it is not legal. End-of-generation and `<[N]>` token edges
        are not included (see `step_token`)."""
        targets = np.zeros(self.vocab.n_logits, dtype=np.int32)
        if cid != DEAD:
            with self._lock:
                walk(self.trie, self.byte_class, self.transitions, np.zeros(1, dtype=np.int64), cid, targets)
            copy_duplicates(self.trie, targets)
        return targets

    def stats(self) -> dict:
        """Sizes for inspect and bench."""
        return {
            "nfa_states": len(self.automaton.eps),
            "configurations": len(self.configs),
            "byte_classes": self.n_classes,
            "masks_cached": len(self._masks) + len(self._packed),
            "walks_cached": len(self._walks),
            "compile_ms": round(self.compile_s * 1000, 3),
        }


def _zeroed_chunk(rows: int, n: int) -> np.ndarray:
    """A (rows, n) bool array of fresh zeroed pages from the system, touched only where written."""
    return fresh_pages((rows, n), bool)


def compile_grammar(
    grammar: "Grammar | Constraint", vocab: Vocabulary, *, use_cache: bool = True, warm: bool = False
) -> CompiledGrammar:
    """Bind a grammar (or a Constraint's) to a vocabulary. Masks are computed lazily, kept
    in memory, and (with use_cache) restored from and saved to the on-disk cache by `persist()`.
    With `warm`, the repeats' chains are followed before the first mask (`CompiledGrammar.warm`):
    off by default, since the first mask would wait for work that the masks inside those
    repeats do when (and if) generation gets there."""
    grammar = getattr(grammar, "grammar", grammar)  # a Constraint's (no import of the front ends here)
    if not isinstance(grammar, Grammar):
        raise UsageError(
            f"grammar must be a Grammar or a Constraint, not {type(grammar).__name__}", parameter="grammar"
        )
    if not isinstance(vocab, Vocabulary):
        raise UsageError(
            f"vocab must be a Vocabulary (model.vocabulary), not {type(vocab).__name__}", parameter="vocab"
        )
    # (what it makes lives as long as the grammar: left in the young generations, it would
    # be traversed by the collections of the first masks, a millisecond or more each)
    with gc_paused():
        compiled = CompiledGrammar(grammar, vocab)
        if use_cache:
            compiled.restore()
        if warm:
            compiled.warm()
    return compiled


__all__ = ["CompiledGrammar", "compile_grammar", "DEAD"]
