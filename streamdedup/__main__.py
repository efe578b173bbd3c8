"""`python -m streamdedup` is the `streamdedup` command."""

from streamdedup.cli import main

main()
