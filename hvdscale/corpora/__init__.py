"""The sentences runs train on: synthetic generators (Markov, translation-like), text corpora,
vocabularies and batches, the fixed evaluation set, and the gettext catalogs as a real corpus.
Framework-free (numpy only)."""
