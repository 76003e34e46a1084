"""The fault suite's harness: real tickwork processes, injected faults, an independent ledger.

- ``ledger``: what ran, written by the executed jobs themselves into a SQLite file of their own.
- ``classify``: every expected occurrence as ok, lost, duplicated (explained or not), unexpected
  or early; pure, so the rules themselves are tested without processes.
- ``procs``: ``tickwork scheduler | worker | run`` as child processes whose logs are read.
- ``run``: a FaultRun ties them together: jobs, expected occurrences, faults at seeded moments,
  and the verdict.
- ``webhook``: an HTTP target that hangs or trickles bytes.
- ``redisserver``: a private ``redis-server`` a test may flush, restart or stop
  (``FaultRun(redis=url)`` gives it to the schedulers and workers).
- ``rediscluster`` and ``redissentinel``: a private Redis Cluster (3 masters, a replica each)
  and a Sentinel set-up (master, replica, 3 sentinels) whose masters a test may ``kill -9``.
- ``redistopology``: any of the three behind one face (flush, restart empty, hang the master),
  so one fault case runs on each.
- ``proxy``: a TCP proxy that becomes a blackhole, a partition between one process and Redis.
- ``pgserver``: a private PostgreSQL server a test may stop or restart in immediate mode
  (``FaultRun.record_outage`` records such a fault of every process).
"""
