"""The mask engine: Grammar x Vocabulary in, the exact legal token set per step out.

Never imports a model (llama_cpp), the decoder, or anything above it in the layer list;
numpy and numba only.

Files by lifetime:
    per vocabulary   vocab.py (Vocabulary), trie.py (the byte trie), slices.py (string
                     slices), cache.py (data on disk, never code)
    per grammar      automaton.py (the byte-level pushdown automaton), token_edges.py,
                     table.py (interned configurations, their transitions),
                     compile.py (CompiledGrammar)
    per mask         the walk: walk.py (the numpy walk and its driver), kernel.py (loads the
                     compiled walk), native.py (its numba loops); utf8.py
    per generation   matcher.py (Matcher: run-time state only), budget.py (the token budget),
                     forced.py (bytes the grammar dictates)
"""
