"""Helpers of tests/e2e/test_migrate.py: the graph that writes the source threads, and a saver
factory for the ``python:`` source scheme."""
