"""The filter of a search: InMemoryStore's semantics (``langgraph.store.memory``), kept here as
it defines them."""

from __future__ import annotations

from typing import Any


def compare_values(item_value: Any, filter_value: Any) -> bool:
    """Whether ``item_value`` matches ``filter_value`` (nested equality, $-operators)."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(apply_operator(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(compare_values(i, f) for i, f in zip(item_value, filter_value, strict=False))
        )
    return bool(item_value == filter_value)


def apply_operator(value: Any, operator: str, op_value: Any) -> bool:
    """One comparison operator, as InMemoryStore applies it."""
    if operator == "$eq":
        return bool(value == op_value)
    if operator == "$gt":
        return float(value) > float(op_value)
    if operator == "$gte":
        return float(value) >= float(op_value)
    if operator == "$lt":
        return float(value) < float(op_value)
    if operator == "$lte":
        return float(value) <= float(op_value)
    if operator == "$ne":
        return bool(value != op_value)
    raise ValueError(f"Unsupported operator: {operator}")
