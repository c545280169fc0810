"""Performance benchmarks of the SDK, the webhook receiver and the registry.

Run ``make bench`` (``python -m benchmarks``) for the full suite or ``python -m benchmarks --quick``
for a smoke run; the report goes to ``benchmarks/RESULTS.md``.  Nothing here is imported by the
packages or the test suite's assertions: speed lives here, not in tests.
"""
