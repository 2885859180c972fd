"""The EMQ verbs, one module per verb, each exporting COMMANDS (see runner.py).

Shared planner helpers live in job.py (guard, entry, finishing),
retention.py (the trims), lanes.py (groups: the ring, the slots, the
counters) and job_log.py (a job's log lines); they register no command.
"""

from emqd.verbs import (
    add,
    claim,
    complete,
    config,
    epoch,
    extend,
    fail,
    get,
    lane_limit,
    lane_list,
    log,
    logs,
    pause,
    progress,
    promote,
    queues,
    remove,
    requeue,
    resume,
    revive,
    stalled_check,
    stats,
    wait,
)

ALL = (add, epoch, get, stats, queues, pause, resume, config, claim, complete, fail, requeue,
       extend, stalled_check, promote, revive, remove, lane_limit, lane_list, progress, log,
       logs, wait)
