"""TTL, as LangGraph's store tests check it (see test_langgraph_store_cases.py for the upstream
files), on the virtual clock of test_store_ttl.py (minutes pass at once). That file already has
the expiry in get/search/listing, refresh_on_read with refresh_ttl=False on get, a per-item TTL
without a ttl config, sweep_ttl and the sweepers; these are the cases it does not have."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import GetOp, PutOp, SearchOp

from .cases import call, keys, open_store
from .test_store_ttl import Clock

KINDS = pytest.mark.parametrize("kind", ["sync", "async"])


async def alive(store: Any, namespace: tuple[str, ...], *names: str) -> list[str]:
    """Which of ``names`` a get finds (without renewing them)."""
    found = []
    for name in names:
        if await call(store, "get", namespace, name, refresh_ttl=False) is not None:
            found.append(name)
    return found


# postgres test_store.py::test_store_ttl, test_async_store.py::test_store_ttl, langgraph-redis
# test_store.py::test_store_ttl / test_async_store.py::test_store_ttl: a get and a search with
# refresh_ttl renew an item, a get and a search without it do not. (The upstream tests pass
# query= to a store without an index: a plain search, as here.)
@KINDS
async def test_store_ttl(server_url: str, kind: str) -> None:
    clock = Clock()
    ttl = {"default_ttl": 1, "refresh_on_read": True, "sweep_interval_minutes": 0.5}
    async with open_store(server_url, kind, ttl=ttl) as store:
        clock.drive(store)
        ns = ("foo",)
        await call(store, "put", ns, key="item1", value={"foo": "bar"}, ttl=1)
        clock.advance(0.6)
        assert (await call(store, "get", ns, key="item1", refresh_ttl=True)).value == {"foo": "bar"}
        clock.advance(0.6)  # 1.2: alive, renewed at 0.6
        assert keys(await call(store, "search", ns, query="foo", refresh_ttl=True)) == ["item1"]
        clock.advance(0.6)  # 1.8: alive, renewed at 1.2
        assert await call(store, "get", ns, key="item1", refresh_ttl=False) is not None
        clock.advance(0.5)  # 2.3: the renewal of 1.2 ran out at 2.2; 1.8 renewed nothing
        assert await call(store, "search", ns, query="bar", refresh_ttl=False) == []
        assert await call(store, "get", ns, "item1") is None


# postgres test_store.py::test_omit_expired_filters_read_paths (and its async twin): an
# expired item is in no get or search, its namespace (nothing else in it) in no listing
@KINDS
async def test_expired_items_are_in_no_read(server_url: str, kind: str) -> None:
    clock = Clock()
    async with open_store(server_url, kind, ttl={"default_ttl": 1}) as store:
        clock.drive(store)
        await call(store, "put", ("omit", "expired"), "e", {"data": "gone"})
        await call(store, "put", ("omit", "control"), "c", {"data": "keep"}, ttl=None)
        clock.advance(1)
        assert await call(store, "get", ("omit", "expired"), "e") is None
        assert (await call(store, "get", ("omit", "control"), "c")).value == {"data": "keep"}
        assert await call(store, "search", ("omit", "expired")) == []
        assert keys(await call(store, "search", ("omit",))) == ["c"]
        assert await call(store, "list_namespaces", prefix=("omit",)) == [("omit", "control")]


# postgres test_store.py::test_omit_expired_refresh_ttl_only_refreshes_live_rows: a renewing
# read does not bring an expired item back, and does renew the live ones it reads
@KINDS
async def test_a_renewing_read_renews_live_items_only(server_url: str, kind: str) -> None:
    clock = Clock()
    async with open_store(server_url, kind, ttl={"default_ttl": 2}) as store:
        clock.drive(store)
        ns = ("refresh",)
        await call(store, "put", ns, "expired", {"n": 0}, ttl=1)
        await call(store, "put", ns, "live_get", {"n": 1})
        await call(store, "put", ns, "live_search", {"n": 2})
        clock.advance(1)
        assert await call(store, "get", ns, "expired", refresh_ttl=True) is None
        assert keys(await call(store, "search", ns, refresh_ttl=True)) == [
            "live_search",
            "live_get",
        ]
        assert (await call(store, "get", ns, "live_get", refresh_ttl=True)).value == {"n": 1}
        clock.advance(1.5)  # 2.5: past the puts' 2 minutes, within the renewals' (3)
        assert await alive(store, ns, "expired", "live_get", "live_search") == [
            "live_get",
            "live_search",
        ]
        clock.advance(0.5)
        assert await alive(store, ns, "expired", "live_get", "live_search") == []


# postgres test_store.py::test_omit_expired_search_pagination: an expired item inside the
# first page's window does not shorten the page; the pages are of live items
@KINDS
async def test_an_expired_item_does_not_shorten_a_page(server_url: str, kind: str) -> None:
    clock = Clock()
    async with open_store(server_url, kind, ttl={"default_ttl": 10}) as store:
        clock.drive(store)
        ns = ("page",)
        for key in ("c", "b"):
            await call(store, "put", ns, key, {"k": key})
        await call(store, "put", ns, "expired", {"k": "x"}, ttl=1)
        await call(store, "put", ns, "a", {"k": "a"})  # newest first: a, expired, b, c
        clock.advance(1)
        assert keys(await call(store, "search", ns, limit=2, offset=0)) == ["a", "b"]
        assert keys(await call(store, "search", ns, limit=2, offset=2)) == ["c"]


# (TTLConfig as BaseStore reads it, PostgresStore's too): refresh_on_read=False makes a read
# without refresh_ttl leave the TTL as it is, refresh_ttl=True still renews; a put's own ttl
# overrides default_ttl, ttl=None never expires
@KINDS
async def test_refresh_on_read_false_and_a_ttl_per_put(server_url: str, kind: str) -> None:
    clock = Clock()
    ttl = {"default_ttl": 10, "refresh_on_read": False}
    async with open_store(server_url, kind, ttl=ttl) as store:
        clock.drive(store)
        ns = ("n",)
        for key, item_ttl in [("plain", ...), ("renewed", ...), ("long", 20), ("never", None)]:
            if item_ttl is ...:
                await call(store, "put", ns, key, {"k": key})
            else:
                await call(store, "put", ns, key, {"k": key}, ttl=item_ttl)
        clock.advance(8)
        assert await call(store, "get", ns, "plain") is not None  # not renewed
        assert keys(await call(store, "search", ns)) == ["never", "long", "renewed", "plain"]
        assert await call(store, "get", ns, "renewed", refresh_ttl=True) is not None
        clock.advance(8)  # 16
        assert await alive(store, ns, "plain", "renewed", "long", "never") == [
            "renewed",
            "long",
            "never",
        ]
        clock.advance(8)  # 24
        assert await alive(store, ns, "plain", "renewed", "long", "never") == ["never"]


# (the TTL fields of the ops, as a batch passes them: PutOp.ttl, GetOp and SearchOp
# refresh_ttl)
@KINDS
async def test_ttl_through_batch(server_url: str, kind: str) -> None:
    clock = Clock()
    async with open_store(server_url, kind, ttl={"default_ttl": 5}) as store:
        clock.drive(store)
        ns = ("b",)
        await call(
            store,
            "batch",
            [
                PutOp(ns, "one", {"v": 1}, ttl=1),
                PutOp(ns, "two", {"v": 2}, ttl=2),
                PutOp(ns, "three", {"v": 3}, ttl=2),
                PutOp(ns, "never", {"v": 4}, ttl=None),
            ],
        )
        clock.advance(1.5)
        got = await call(
            store,
            "batch",
            [
                GetOp(ns, "one", refresh_ttl=True),
                GetOp(ns, "two", refresh_ttl=True),
                SearchOp(ns, filter={"v": 3}, refresh_ttl=False),
            ],
        )
        assert got[0] is None and got[1].value == {"v": 2} and keys(got[2]) == ["three"]
        clock.advance(1)  # 2.5: "two" was renewed at 1.5 (for 2), "three" was not
        assert await alive(store, ns, "one", "two", "three", "never") == ["two", "never"]
