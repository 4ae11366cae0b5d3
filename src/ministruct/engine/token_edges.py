"""Whole-token edges (`<[N]>`, `<|name|>`, and their negations `!<...>`) against a vocabulary."""

from __future__ import annotations

import numpy as np

from ministruct.engine.automaton import Automaton, Config
from ministruct.engine.nfa import TokenEdge
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import GrammarError


class TokenEdges:
    """The token ids a grammar's token edges name, and the tokens they allow in a configuration."""

    def __init__(self, automaton: Automaton, vocab: Vocabulary, source: str) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.names = _resolve_names(automaton, vocab, source)
        self._text_ids: frozenset[int] | None = None

    def resolve(self, edge: TokenEdge) -> int | None:
        return self.names.get(str(edge.name))

    def add_to(self, config: Config, legal: np.ndarray) -> None:
        """OR into `legal` the tokens that token edges allow from `config`."""
        automaton = self.automaton
        if automaton.greedy and automaton.has_markers(config):
            config = config | automaton.resolve(config)  # (a token is no byte: the lexemes here end first)
        for st in config:
            if not st:
                continue
            for edge in self.automaton.token_edges[st[-1]]:
                want = edge.token_id if edge.token_id is not None else self.resolve(edge)
                if not edge.negated:
                    if want is not None and 0 <= want < self.vocab.n_tokens:
                        legal[want] = True
                    continue
                # any ordinary token but `want`
                keep = bool(want is not None and 0 <= want < len(legal) and legal[want])
                legal[self.vocab.text_ids] = True
                if self._text_ids is None:
                    self._text_ids = frozenset(self.vocab.text_ids.tolist())
                if want in self._text_ids:
                    legal[want] = keep


def _resolve_names(automaton: Automaton, vocab: Vocabulary, source: str) -> dict[str, int]:
    names: dict[str, int] = {}
    for edges in automaton.token_edges:
        for e in edges:
            if e.token_id is not None:
                if not 0 <= e.token_id < vocab.n_tokens:
                    raise GrammarError(
                        f"token <[{e.token_id}]> is outside the vocabulary (0..{vocab.n_tokens - 1})",
                        source=source,
                    )
                continue
            name = str(e.name)
            tid = vocab.id_of_control(name)
            if tid is None:
                matches = [i for i, t in enumerate(vocab.tokens) if t == name.encode()]
                tid = matches[0] if matches else None
            if tid is None:
                raise GrammarError(f"token {name} is not in the vocabulary", source=source)
            names[name] = tid
    return names
