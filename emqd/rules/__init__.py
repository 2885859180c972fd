"""The rules the verbs share (protocol sections 4 to 8), none of them a command.

job.py (a row's guard, entry into pending, finishing), job_log.py (a job's log
lines), enqueue.py (creating jobs), retention.py (the trims, and housekeeping's
retention slice), settings.py (a queue's settings), lanes.py (groups: the ring,
the slots, the counters), rates.py (rate windows), flows.py (parents and
children), unique.py (unique keys), ties.py (what a finished job settles),
schedules.py (repeatable and cron jobs), tokens.py (the queue's token floor),
backoff.py (retry delays), args.py (parsing the verbs' arguments). The verbs
(emqd/verbs/) plan with them; they register no command.
"""
