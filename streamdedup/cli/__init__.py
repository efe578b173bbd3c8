"""The `streamdedup` command line; ``main`` is the console script's entry point."""

from streamdedup.cli.main import main

__all__ = ["main"]
