"""Compatibility with the previous release (tests/e2e/test_compat.py)."""
