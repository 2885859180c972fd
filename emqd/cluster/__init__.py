"""Cluster mode (docs/CLUSTER.md): many emqd fronts over a Valkey or Redis Cluster.

The cluster holds every queue's keys in the single process's layout (one hash
slot per queue: `emq:{QUEUE}:...`) and does replication, persistence and
failover. One front owns a queue at a time, by a lease key in the queue's own
slot (`ownership.py`); it loads the queue into its in-memory store
(`loader.py`) and runs it there as the single process does, writing each loop
iteration's plans through to the cluster behind the commit path
(`sink.py`: one script call per queue that first checks the lease's term,
then `WAIT` for replicas). A front that does not own a queue forwards its
requests to the owner (`router.py`); `front.py` ties these together.
"""
