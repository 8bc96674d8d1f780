"""The namespaces of the ops: the labels refused before anything is sent, and the prefix and
suffix conditions of searches and listings."""

from __future__ import annotations

from collections.abc import Sequence

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)


def check_namespaces(ops: Sequence[Op]) -> None:
    """Refuse an op whose namespace labels BaseStore's methods refuse (not a string, empty, a
    period, a NUL byte), before anything is embedded or sent: ``batch`` takes ops that did not
    go through those methods, and here the label ``"a.b"`` would be the namespace ``("a", "b")``
    (keys.py). As ``PostgresStore`` does, with BaseStore's messages."""
    for op in ops:
        if isinstance(op, (GetOp, PutOp)):
            paths = [op.namespace]
        elif isinstance(op, SearchOp):
            paths = [op.namespace_prefix]
        elif isinstance(op, ListNamespacesOp):
            paths = [c.path for c in op.match_conditions or ()]
        else:
            continue
        for namespace in paths:
            for label in namespace:
                if not isinstance(label, str):
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        f"labels must be strings, but got {type(label).__name__}."
                    )
                if "." in label:
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        "labels cannot contain periods ('.')."
                    )
                if "\x00" in label:
                    raise InvalidNamespaceError(
                        f"Invalid namespace label '{label}' found in {namespace}. Namespace "
                        "labels cannot contain NUL bytes ('\\x00')."
                    )
                if not label:
                    raise InvalidNamespaceError(
                        f"Namespace labels cannot be empty strings. Got {label} in {namespace}"
                    )


def does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A list_namespaces prefix or suffix condition ('*' matches any label)."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def literal_prefix(conditions: Sequence[MatchCondition] | None) -> tuple[str, ...]:
    """The labels before the first wildcard of the prefix condition (the index range read)."""
    for condition in conditions or ():
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def under(namespace: tuple[str, ...], namespace_prefix: tuple[str, ...]) -> bool:
    """(A list as the prefix, as PostgresStore takes it, is the same tuple.)"""
    return namespace[: len(namespace_prefix)] == tuple(namespace_prefix)
