"""The conformance suites, one per seam, that every driver runs against a real backend:
``store`` (with its jobs, occurrences and keys parts), ``admin``, ``secrets`` and ``dispatch``."""
