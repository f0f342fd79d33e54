"""``python -m specscope``: the command line."""

from specscope.cli.app import entry_point

if __name__ == "__main__":  # not when a process of `ingest --jobs` imports the main module
    entry_point()
