"""`python -m streamdedup` is the `streamdedup` command."""

from streamdedup.cli.main import main

main()
