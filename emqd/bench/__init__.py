"""emqd-bench: the same job cycle against emqd and against redis-server + Lua.

`python -m emqd.bench` (or the `emqd-bench` command) starts its own emqd and,
when one is on PATH, its own redis-server, runs the chosen scenarios against
both with the same client code, and prints each figure beside its ratio
emqd / redis. The Lua scripts that play EMQ's verbs on Redis live in
`emqd/bench/lua/`, installed with the package. See docs/PERFORMANCE.md.
"""
