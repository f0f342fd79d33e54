"""Prometheus: counters pulled from a server's HTTP API or scraped from ``/metrics``.

Input: range-vector answers (``pull``) or exposition text (``scrape``).
Output: interval rows (differences of consecutive samples, reset-aware: ``intervals``) in
the same tables logs fill, written through ``store``; and the alerting rules (``rules``).
Imports: the kernel and ``store``; never ``logs``, ``analysis``, ``report`` or ``cli``.
HTTP clients are imported when a pull or scrape starts, not with the package.
"""
