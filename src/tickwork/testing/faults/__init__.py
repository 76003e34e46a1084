"""The fault suite's harness: real tickwork processes, injected faults, an independent ledger.

- ``ledger``: what ran, written by the executed jobs themselves into a SQLite file of their own.
- ``classify``: every expected occurrence as ok, lost, duplicated (explained or not), unexpected
  or early; pure, so the rules themselves are tested without processes.
- ``procs``: ``tickwork scheduler | worker | run`` as child processes whose logs are read.
- ``run``: a FaultRun ties them together: jobs, expected occurrences, faults at seeded moments,
  and the verdict.
- ``webhook``: an HTTP target that hangs or trickles bytes.

Redis faults (FLUSHALL, restart, a blackhole proxy) slot in as more ``FaultRun`` fault methods
and a ``--redis`` argument to the processes; the ledger and the classifier do not change.
"""
