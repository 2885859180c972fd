"""The EMQ verbs, one module per verb, each exporting COMMANDS (see runner.py).

Shared planner helpers live in job.py (guard, entry, finishing),
retention.py (the trims), lanes.py (groups: the ring, the slots, the
counters), job_log.py (a job's log lines), enqueue.py (creating jobs),
flows.py (parents and children), unique.py (unique keys), ties.py (what a
finished job settles), rates.py (rate windows); they register no command.
"""

from emqd.verbs import (
    add,
    children,
    claim,
    complete,
    config,
    epoch,
    extend,
    fail,
    flow,
    get,
    lane_limit,
    lane_list,
    lane_rate,
    log,
    logs,
    pause,
    progress,
    promote,
    queues,
    rate,
    remove,
    repeat,
    repeat_del,
    repeats,
    requeue,
    resume,
    revive,
    stalled_check,
    stats,
    wait,
)

ALL = (add, epoch, get, stats, queues, pause, resume, config, claim, complete, fail, requeue,
       extend, stalled_check, promote, revive, remove, lane_limit, lane_list, progress, log,
       logs, wait, flow, children, repeat, repeat_del, repeats, rate, lane_rate)
