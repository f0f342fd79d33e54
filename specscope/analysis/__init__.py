"""Analysis: what the stored telemetry says, as findings, advice and comparisons.

Input: a ``Store`` (or frames of its tables, as ``watch`` holds them).
Output: ``Finding``s worst first (``detectors``), ``Advice`` per k (``advise``), a
``Comparison`` of two runs (``compare``), the runs overview (``runs``).
``evidence`` gathers and joins the tables once; every detector reads only that.
Imports: the kernel and ``store``; never a log, a server, ``report`` or ``cli``.
"""
