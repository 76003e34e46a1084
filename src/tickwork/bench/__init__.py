"""``tickwork bench``: the workloads of DESIGN §6, run against real processes.

- ``jobs``: the no-op job executed workers run; it writes the independent record.
- ``record``: reads that record while the run goes on, and the statistics over it.
- ``deploy``: a fresh database, the scheduler and worker processes, their memory.
- ``w1``, ``w2``, ``w3``: the workloads; ``runner`` what they share.
- ``progress``, ``report``: the progress line, the summary table, the SVG plot.
- ``tables``, ``sizeplot``: the tables' rows and bytes sampled during a run (``w2
  --retention``), whether they stayed flat, and their SVG plot.
"""
