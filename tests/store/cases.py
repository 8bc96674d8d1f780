"""Helpers of the test_langgraph_store_cases*.py files: the store under test, sync or async,
behind one awaitable API, and the shapes its answers are compared in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import Item

from langgraph.store.rediskv import AsyncRedisStore, RedisStore

from ..conftest import new_prefix

Store = RedisStore | AsyncRedisStore


@asynccontextmanager
async def open_store(url: str, kind: str, **kwargs: Any) -> AsyncIterator[Store]:
    """A store of its own prefix (unless ``prefix=``): ``kind`` "sync" (RedisStore) or "async"
    (AsyncRedisStore)."""
    kwargs.setdefault("prefix", new_prefix())
    if kind == "sync":
        with RedisStore.from_conn_string(url, **kwargs) as store:
            yield store
    else:
        async with AsyncRedisStore.from_conn_string(url, **kwargs) as a:
            yield a


async def call(store: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """``store.name(...)``, or ``await store.aname(...)`` on AsyncRedisStore."""
    if isinstance(store, AsyncRedisStore):
        return await getattr(store, "a" + name)(*args, **kwargs)
    return getattr(store, name)(*args, **kwargs)


def shape(items: list[Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    return [(tuple(i.namespace), i.key, i.value) for i in items]


def one(item: Item | None) -> tuple[tuple[str, ...], str, Any] | None:
    return None if item is None else (tuple(item.namespace), item.key, item.value)


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def plain(result: Any) -> Any:
    """A batch result in a comparable shape: an item as ``one``, a list of items as ``shape``,
    a listing of namespaces as it is."""
    if isinstance(result, Item):
        return one(result)
    if isinstance(result, list) and result and isinstance(result[0], Item):
        return shape(result)
    return result
