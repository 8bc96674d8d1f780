"""list_namespaces: the live namespaces the global index names, under the conditions of the
op. A listing that can stop at its page reads the index a step at a time (``listing_step``);
with a max_depth it walks the cut namespaces, jumping past the namespaces under each one
found."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from langgraph.store.base import ListNamespacesOp

from .keys import index_member, index_namespace, namespace_index_key, prefix_range, text
from .namespaces import does_match, literal_prefix
from .rounds import Call, StoreConfig
from .sweep import live_namespaces


def listing_step(op: ListNamespacesOp) -> int | None:
    """How many index entries a listing reads at a time, when it can stop at its page: no
    condition but one prefix without wildcards (the index, in the order of the tuples, then
    holds the answer in order: index_member; with a max_depth, in the order of the cut
    namespaces); else None (it reads every namespace under its prefix)."""
    conditions = op.match_conditions or ()
    if len(conditions) > 1 or (op.max_depth is not None and op.max_depth < 1):
        return None
    if conditions and (conditions[0].match_type != "prefix" or "*" in conditions[0].path):
        return None
    return max(op.offset + op.limit, LISTING_STEP_MIN)


LISTING_STEP_MIN = 64


def list_namespaces(
    config: StoreConfig, op: ListNamespacesOp, namespaces: list[tuple[str, ...]], now: str
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """The live namespaces the index names (the empty ones are swept from it). A listing
    that can stop at its page (listing_step) reads the index a step at a time until it has
    ``offset + limit`` live namespaces; else every namespace under its prefix."""
    step = listing_step(op)
    if step is not None and op.max_depth is not None:  # (listing_step: max_depth >= 1)
        return (yield from _list_cut_namespaces(config, op, namespaces, now, step, op.max_depth))
    if step is not None:
        need = op.offset + op.limit
        live: list[tuple[str, ...]] = []
        page = namespaces
        while True:
            alive, _ = yield from live_namespaces(config, page, now)
            live += alive
            if len(live) >= need or len(page) < step:
                return live[op.offset : need]
            page = yield from _next_step(config, op, f"({index_member(page[-1])}", step)
    namespaces, _ = yield from live_namespaces(config, namespaces, now)
    if op.match_conditions:
        namespaces = [n for n in namespaces if all(does_match(c, n) for c in op.match_conditions)]
    if op.max_depth is not None:
        namespaces = sorted({n[: op.max_depth] for n in namespaces})
    else:
        namespaces = sorted(namespaces)
    return namespaces[op.offset : op.offset + op.limit]


def _list_cut_namespaces(
    config: StoreConfig,
    op: ListNamespacesOp,
    page: list[tuple[str, ...]],
    now: str,
    step: int,
    depth: int,
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """A listing with a max_depth: the live namespaces cut to ``depth`` labels, walked in
    the index's order from ``page`` (its first step). Once a cut namespace is found, the
    walk jumps past every namespace under it (to its member followed by "\\x01"): the
    namespaces of 20,000 users cut to ("users", u) cost a step per ``step`` users, not one
    per namespace. A cut counts when one namespace under it is live: the first of each is
    asked, then the others of those whose first was empty."""
    need = op.offset + op.limit
    found: list[tuple[str, ...]] = []
    while page:
        groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for namespace in page:
            groups.setdefault(namespace[:depth], []).append(namespace)
        live = set((yield from live_namespaces(config, [g[0] for g in groups.values()], now))[0])
        rest = [n for g in groups.values() if g[0] not in live for n in g[1:]]
        if rest:
            live.update((yield from live_namespaces(config, rest, now))[0])
        for cut, group in groups.items():
            if any(n in live for n in group) and (not found or found[-1] != cut):
                found.append(cut)
        if len(found) >= need or len(page) < step:
            break
        cut = page[-1][:depth]
        # past the cut's namespaces when it was found (a namespace shorter than the depth is
        # its own cut: the longer ones under it are cuts of their own), else on after the
        # last one read
        after = (
            f"[{index_member(cut)}\x01"
            if found and found[-1] == cut and len(cut) == depth
            else f"({index_member(page[-1])}"
        )
        page = yield from _next_step(config, op, after, step)
    return found[op.offset : need]


def _next_step(
    config: StoreConfig, op: ListNamespacesOp, after: str, step: int
) -> Generator[list[Call], list[Any], list[tuple[str, ...]]]:
    """The next ``step`` namespaces of the index under the listing's prefix, from ``after``
    (a ZRANGEBYLEX bound)."""
    _, high = prefix_range(literal_prefix(op.match_conditions))
    index = namespace_index_key(config.prefix)
    (names,) = yield [("command", "ZRANGEBYLEX", [index, after, high, "LIMIT", 0, step], ())]
    return [index_namespace(text(m)) for m in names]
