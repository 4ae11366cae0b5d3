"""The mask engine: Grammar x Vocabulary in, the exact legal token set per step out.

Never imports a model (llama_cpp), the decoder, or anything above it in the layer list;
numpy and numba only.

Files by lifetime:
    per vocabulary   vocab.py (Vocabulary), trie.py (the byte trie), slices.py (string
                     slices), cache.py (data on disk, never code)
    per grammar      nfa.py (Grammar IR -> byte NFA), automaton.py (the pushdown automaton
                     and its configurations), token_edges.py, merge_states.py, table.py
                     (interned configurations, their transitions), chains.py (where a
                     slice decides a configuration), compile.py (CompiledGrammar) with
                     mask_walks.py (how a mask is walked), prune.py, positions.py
    per mask         the walk: walk.py (the numpy walk and its driver), kernel.py (loads the
                     compiled walk), native.py (its numba loops)
    per generation   matcher.py (Matcher: run-time state only), budget.py (the token budget),
                     forced.py (bytes the grammar dictates), think.py
    helpers          utf8.py (code points <-> UTF-8 byte ranges), spans.py (intervals that
                     carry targets), pages.py (fresh zeroed pages, reserved tables)
"""
