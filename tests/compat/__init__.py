"""Compatibility with the previous release (tests/test_compat.py)."""
