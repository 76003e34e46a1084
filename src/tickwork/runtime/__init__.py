"""The processes tickwork runs, each put together from settings by one builder.

- ``base.py``: what every process shares: its driver, metrics, signals and stop order.
- ``assemble.py``: builds the parts (executors, the worker pool and its claim source, the
  scheduler loops, the Redis side) from settings, a store, a dispatch and an observer.
- ``embedded.py`` (``tickwork run``), ``scheduler.py`` (``tickwork scheduler``),
  ``worker.py`` (``tickwork worker``), ``api.py`` (``tickwork api``): one kind of process each.
"""
