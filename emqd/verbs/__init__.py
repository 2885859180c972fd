"""The EMQ verbs' planners, one module per verb; the rules they share are in emqd/rules/.

A verb module provides two functions, which `emqd.command.verb_command` makes
a command-table row of:

    parse(argv, config) -> args               refuses bad input (ReplyError); the
                                              server Config gives defaults (max-payload, ...)
    plan(args, view, now_ms, run_id)          -> Plan | Block | reply value

and, when what it writes depends on who asks (CLAIM and EXTEND stamp a named
connection as the lease's holder), `with_holder(args, holder) -> args`.

`plan` reads the store through `view` (emqd/store/keyspace.py `View`: the
hashes and sorted sets, read-only), decides, and returns the plan of ops with
its reply; it never writes the store, touches a socket or reads the clock:
`now_ms` and `run_id` are inputs. A refusal raises ReplyError before anything
is written, because nothing is written until the commit path applies the plan.
Nothing awaits between the first read and the end of the apply, so the read,
the decision and the apply of one verb are one atomic unit on the event loop.

The seed's planners ask for one read at a time and are answered (`Need`, then
the verdict). Here every read is answered at once by the store in this
process's memory, which lets a planner be one plain pass: a read is a method
call, the verdict its return value. The earlier shape, a `decide` run again
from the top after each round of reads with the reads in a dict, cost about
60% of a job cycle (measured when it was replaced: commit 72accb1). Tests
drive planners with a keyspace built from plain data, and with a recording
`View` where the reads asked matter.

The planners housekeeping runs on a queue's due members (promote.py,
stalled_check.py, repeat_fire.py, rate_release.py) also take typed arguments
from `slice_args(queue, limit, config)`; repeat_fire.py and rate_release.py
have no command.

The rules they share (a job's entry and finishing, lanes, flows, retention,
...) are in emqd/rules/: this package holds the planners alone, one module per
command, named after it (EMQ.LANE.LIMIT is lane_limit.py; EMQ.LANES is
lane_list.py and EMQ.CONFIG queue_config.py, whose short names the rules and
the server's settings use; EMQ.WORKER is worker_order.py, which is not the
Python worker, emqd/client/worker.py), and the three planners housekeeping runs that
no command names (repeat_fire.py, rate_release.py, minute_close.py). The dispatcher
(emqd/dispatch.py) lists the verbs it serves; this package imports none of
them, so importing one rule does not import every verb.
"""
