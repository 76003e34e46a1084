"""tickwork's own test harness: driver conformance suites, factories, fixtures, process and
fault-suite helpers. It serves this project's tests and is not a public API: names here change
without notice.

For your own project's tests use the pytest plugin, ``tickwork.pytest_plugin`` (fixtures
``tickwork_eager`` and ``tickwork_clock``; docs/testing.md).
"""

__all__: list[str] = []
