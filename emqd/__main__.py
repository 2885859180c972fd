"""`python -m emqd` is the same as the `emqd` command."""

from emqd.cli import main

main()
