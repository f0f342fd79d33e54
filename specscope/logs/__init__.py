"""Logs: server output (files, ``.gz``, pastes, stdin) read into the store's tables.

Input: bytes of a log, and the format definitions in ``parsers/`` (``definitions``).
Output: spec-decode, engine-stats, event and bench rows, run rows and a sources row,
written through ``store`` (``ingest``), or a ``ParseResult`` for a pasted text.
Flow: source → clean → parser (line by line, the reference) or bulk (whole blocks, the
fast path, held to the parser by differential tests) → assemble → store.
Imports: the kernel and ``store``; never ``prometheus``, ``analysis``, ``report`` or ``cli``.
"""
