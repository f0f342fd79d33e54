"""Reports: findings, runs and charts as Markdown (for a GitHub comment) or HTML.

Input: a ``Store``, through ``analysis``. Output: a ``Report`` and its rendering.
Imports: the kernel, ``store``, ``analysis``, and ``logs.source`` alone of the logs (to
quote the evidence lines); never ``prometheus`` or ``cli``. Altair is imported on first
use, so that ``import specscope`` does not pay for it.
"""
