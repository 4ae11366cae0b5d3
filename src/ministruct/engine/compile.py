"""Grammar x Vocabulary -> CompiledGrammar: legal-token masks per parser configuration.

Parser configurations (automaton.py) are interned to small integers and their byte
transitions kept in a table that fills itself on demand (a lazily determinized
pushdown automaton). A mask is one vectorized walk of the vocabulary trie through
that table, pruned at dead configurations, and is cached per configuration.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from ..errors import CompileLimitError, GrammarError
from ..grammar.ir import Grammar
from .automaton import Automaton, Config, TokenEdge
from .trie import ClassTrie, TokenTrie, expand_children, trie_for
from .vocab import Vocabulary

DEAD = 0
UNKNOWN = -1
MAX_CONFIGS = 1_000_000
MASK_CACHE_BYTES = 512 * 1024 * 1024


class CompiledGrammar:
    """A grammar bound to a vocabulary; shared by every Matcher of that pair."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary, automaton: Automaton | None = None) -> None:
        t0 = time.perf_counter()
        self.grammar = grammar
        self.vocab = vocab
        self.automaton = automaton or Automaton(grammar)
        self.trie: TokenTrie = trie_for(vocab)
        cuts = self.automaton.byte_boundaries()
        self.byte_class = (np.searchsorted(np.asarray(cuts), np.arange(256), side="right") - 1).astype(np.int64)
        self.n_classes = len(cuts) - 1
        self.class_rep = np.asarray(cuts[:-1], dtype=np.int64)  # one byte standing for each class
        self.class_trie = ClassTrie.build(self.trie, self.byte_class, self.n_classes)
        self.configs: list[Config] = [frozenset()]
        self.config_ids: dict[Config, int] = {frozenset(): DEAD}
        self.table = np.full((64, self.n_classes), UNKNOWN, dtype=np.int32)
        self.table[DEAD, :] = DEAD
        self._token_steps: dict[tuple[int, int], int] = {}
        self._masks: OrderedDict[int, np.ndarray] = OrderedDict()
        self._mask_bytes = 0
        self.eog = np.asarray(sorted(vocab.eog_ids), dtype=np.int64)
        self._named_tokens = self._resolve_token_names()
        self._canon = self.automaton.canonical_states(self.trie.max_len)
        self._mask_keys: dict[int, int] = {}
        self.initial = self.intern(self.automaton.initial)
        self._saved_size = (1, 0)
        self.compile_s = time.perf_counter() - t0

    # ------------------------------------------------------------ disk cache

    def cache_key(self) -> str:
        from . import cache

        return cache.grammar_key(self.grammar, self.vocab.fingerprint)

    def restore(self) -> bool:
        """Load configurations, transitions and masks a previous run saved (False if none)."""
        from . import cache

        state = cache.load("grammar", self.cache_key())
        if not isinstance(state, dict) or state.get("n_classes") != self.n_classes:
            return False
        configs: list[Config] = state["configs"]
        if not configs or configs[self.initial] != self.configs[self.initial]:
            return False
        self.configs = configs
        self.config_ids = {c: i for i, c in enumerate(configs)}
        self.table = state["table"]
        for cid, packed in state["masks"].items():
            m = np.unpackbits(packed, count=self.vocab.n_logits).astype(bool)
            m.setflags(write=False)
            self._masks[cid] = m
            self._mask_bytes += m.nbytes
        self._saved_size = (len(self.configs), len(self._masks))
        return True

    def persist(self) -> None:
        """Save what this process has learned, if it learned anything new."""
        from . import cache

        size = (len(self.configs), len(self._masks))
        if size == self._saved_size:
            return
        state = {
            "n_classes": self.n_classes,
            "configs": self.configs,
            "table": self.table[: len(self.configs)].copy(),
            "masks": {cid: np.packbits(m) for cid, m in self._masks.items()},
        }
        cache.save("grammar", self.cache_key(), state)
        self._saved_size = size

    # ------------------------------------------------------------ configurations

    def intern(self, config: Config) -> int:
        """The id of a configuration, allocating a table row for a new one."""
        cid = self.config_ids.get(config)
        if cid is not None:
            return cid
        cid = len(self.configs)
        if cid >= MAX_CONFIGS:
            raise CompileLimitError(
                f"{self.grammar.source}: more than {MAX_CONFIGS:,} parser configurations; "
                "the grammar is too large or too deeply nested to mask"
            )
        self.configs.append(config)
        self.config_ids[config] = cid
        if cid >= len(self.table):
            grown = np.full((2 * len(self.table), self.n_classes), UNKNOWN, dtype=np.int32)
            grown[: len(self.table)] = self.table
            self.table = grown
        return cid

    def _fill(self, states: np.ndarray, classes: np.ndarray) -> None:
        keys = np.unique(states.astype(np.int64) * self.n_classes + classes)
        for k in keys.tolist():
            s, c = divmod(k, self.n_classes)
            nxt = self.automaton.step(self.configs[s], int(self.class_rep[c]))
            self.table[s, c] = self.intern(nxt)

    def step_bytes(self, cid: int, data: bytes) -> int:
        """The configuration id after some bytes (DEAD when they are not allowed)."""
        for b in data:
            if cid == DEAD:
                return DEAD
            c = int(self.byte_class[b])
            nxt = int(self.table[cid, c])
            if nxt == UNKNOWN:
                self._fill(np.asarray([cid]), np.asarray([c]))
                nxt = int(self.table[cid, c])
            cid = nxt
        return cid

    def step_token(self, cid: int, token_id: int) -> int:
        """The configuration id after a whole (non end-of-generation) token."""
        key = (cid, token_id)
        hit = self._token_steps.get(key)
        if hit is not None:
            return hit
        nxt = DEAD
        if token_id not in self.vocab.control_ids:
            data = self.vocab.token_bytes(token_id)
            if data:
                nxt = self.step_bytes(cid, data)
        if self.automaton.has_token_edges:
            extra = self.automaton.step_token_edges(self.configs[cid], token_id, self._resolve)
            if extra:
                nxt = self.intern(self.configs[nxt] | extra)
        self._token_steps[key] = nxt
        return nxt

    def is_accepting(self, cid: int) -> bool:
        return Automaton.is_accepting(self.configs[cid])

    def is_terminated(self, cid: int) -> bool:
        """Complete, and no token but end-of-generation can follow."""
        return self.configs[cid] == frozenset({()})

    # ------------------------------------------------------------ masks

    def mask_key(self, cid: int) -> int:
        """The configuration whose mask stands for `cid`'s (itself, or a copy of it that
        sits elsewhere in a long repeat but allows exactly the same tokens)."""
        if not self._canon:
            return cid
        key = self._mask_keys.get(cid)
        if key is None:
            config = self.configs[cid]
            get = self._canon.get
            image = frozenset(tuple(get(q, q) for q in st) for st in config)
            key = cid if image == config else self.intern(image)
            self._mask_keys[cid] = key
        return key

    def has_mask(self, cid: int) -> bool:
        return self.mask_key(cid) in self._masks

    def mask(self, cid: int) -> np.ndarray:
        """Read-only bool array (n_logits): the legal tokens in configuration `cid`."""
        cid = self.mask_key(cid)
        hit = self._masks.get(cid)
        if hit is not None:
            self._masks.move_to_end(cid)
            return hit
        m = self._compute_mask(cid)
        m.setflags(write=False)
        self._masks[cid] = m
        self._mask_bytes += m.nbytes
        while self._mask_bytes > MASK_CACHE_BYTES and len(self._masks) > 1:
            _, old = self._masks.popitem(last=False)
            self._mask_bytes -= old.nbytes
        return m

    def _compute_mask(self, cid: int) -> np.ndarray:
        legal = np.zeros(self.vocab.n_logits, dtype=bool)
        if cid == DEAD:
            return legal
        self._walk(cid, legal, None)
        config = self.configs[cid]
        if Automaton.is_accepting(config) and len(self.eog):
            legal[self.eog] = True
        if self.automaton.has_token_edges:
            self._add_token_edges(config, legal)
        return legal

    def token_targets(self, cid: int) -> np.ndarray:
        """int32 per logits row: the configuration each ordinary (byte-spelled) token leads
        to from `cid`, DEAD where it is not legal. End-of-generation and `<[N]>` token edges
        are not included (see `step_token`)."""
        targets = np.zeros(self.vocab.n_logits, dtype=np.int32)
        if cid != DEAD:
            self._walk(cid, None, targets)
        return targets

    def _walk(self, cid: int, legal: np.ndarray | None, targets: np.ndarray | None) -> None:
        """Walk the class trie from `cid`; mark legal tokens and/or record their end configurations."""
        trie = self.class_trie
        nodes = np.zeros(1, dtype=np.int64)
        states = np.asarray([cid], dtype=np.int64)
        uniform = True  # every live node is in the same configuration
        for d in range(1, trie.max_len + 1):
            cls_all = trie.node_class[d]
            if len(nodes) == len(trie.node_class[d - 1]):
                # every node of the previous level is alive: take the whole level, no expansion
                idx = None
                cls = cls_all
                srep = None if uniform else states[trie.parent[d]]
            else:
                counts = trie.child_count[d - 1][nodes]
                idx = expand_children(trie.child_start[d - 1][nodes], counts)
                if not len(idx):
                    break
                cls = cls_all[idx]
                srep = None if uniform else np.repeat(states, counts)
            if srep is None:
                row = self.table[int(states[0])]
                if (row[cls] == UNKNOWN).any():
                    u = np.unique(cls[row[cls] == UNKNOWN])
                    self._fill(np.full(len(u), int(states[0])), u)
                    row = self.table[int(states[0])]
                nxt = row[cls]
            else:
                nxt = self.table[srep, cls]
                unknown = nxt == UNKNOWN
                if unknown.any():
                    self._fill(srep[unknown], cls[unknown])
                    nxt = self.table[srep, cls]
            live = nxt != DEAD
            if idx is None:
                nodes = np.flatnonzero(live)
            else:
                nodes = idx[live]
            states = nxt[live].astype(np.int64)
            if len(states):
                uniform = bool(states.min() == states.max())
            if len(trie.end_ids[d]):
                ends = trie.end_ids[d]
                if targets is not None:
                    at = np.zeros(len(trie.node_class[d]), dtype=np.int32)
                    at[nodes] = states
                    targets[ends] = at[trie.end_node[d]]
                else:
                    alive = np.zeros(len(trie.node_class[d]), dtype=bool)
                    alive[nodes] = True
                    legal[ends[alive[trie.end_node[d]]]] = True
            if not len(nodes):
                break

    def _add_token_edges(self, config: Config, legal: np.ndarray) -> None:
        """OR into `legal` the tokens that whole-token edges (`<[N]>`, `!<[N]>`) allow."""
        for st in config:
            if not st:
                continue
            for edge in self.automaton.token_edges[st[-1]]:
                want = edge.token_id if edge.token_id is not None else self._resolve(edge)
                if not edge.negated:
                    if want is not None and 0 <= want < self.vocab.n_tokens:
                        legal[want] = True
                    continue
                # any ordinary token but `want`
                keep = bool(want is not None and 0 <= want < len(legal) and legal[want])
                legal[self.vocab.text_ids] = True
                if want in self._text_id_set:
                    legal[want] = keep

    @property
    def _text_id_set(self) -> frozenset[int]:
        s = getattr(self, "_text_ids_cache", None)
        if s is None:
            s = frozenset(self.vocab.text_ids.tolist())
            self._text_ids_cache = s
        return s

    # ------------------------------------------------------------ token names

    def _resolve_token_names(self) -> dict[str, int]:
        names: dict[str, int] = {}
        for edges in self.automaton.token_edges:
            for e in edges:
                if e.token_id is not None:
                    if not 0 <= e.token_id < self.vocab.n_tokens:
                        raise GrammarError(
                            f"token <[{e.token_id}]> is outside the vocabulary (0..{self.vocab.n_tokens - 1})",
                            source=self.grammar.source,
                        )
                    continue
                name = str(e.name)
                tid = self.vocab.id_of_control(name)
                if tid is None:
                    matches = [i for i, t in enumerate(self.vocab.tokens) if t == name.encode()]
                    tid = matches[0] if matches else None
                if tid is None:
                    raise GrammarError(f"token {name} is not in the vocabulary", source=self.grammar.source)
                names[name] = tid
        return names

    def _resolve(self, edge: TokenEdge) -> int | None:
        return self._named_tokens.get(str(edge.name))

    def stats(self) -> dict:
        """Sizes for inspect and bench."""
        return {
            "nfa_states": len(self.automaton.eps),
            "configurations": len(self.configs),
            "byte_classes": self.n_classes,
            "masks_cached": len(self._masks),
            "compile_ms": round(self.compile_s * 1000, 3),
        }


def compile_grammar(grammar: Grammar, vocab: Vocabulary, *, use_cache: bool = True) -> CompiledGrammar:
    """Bind a grammar to a vocabulary. Masks are computed lazily, kept in memory, and
    (with use_cache) restored from and saved to the on-disk cache by `persist()`."""
    compiled = CompiledGrammar(grammar, vocab)
    if use_cache:
        compiled.restore()
    return compiled


__all__ = ["CompiledGrammar", "compile_grammar", "DEAD"]
