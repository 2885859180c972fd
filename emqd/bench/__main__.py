"""`python -m emqd.bench` is the same as the `emqd-bench` command."""

from emqd.bench.command import main

main()
