"""``python -m specscope``: the command line."""

from specscope.cli import entry_point

entry_point()
