"""Issue 30: the server's clock decides expiry, an evicted key of an item is a clear error,
and a search's pages do not skip or repeat items that other clients update meanwhile."""

from __future__ import annotations

import time

import pytest
import redis
from langgraph.store.base import SearchOp

from langgraph.checkpoint.rediskv.errors import StoreItemLostError
from langgraph.store.rediskv import RedisStore, core, paging
from langgraph.store.rediskv.keys import namespace_keys


def skew_client_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """This process's wall clock runs ``seconds`` off (an app server with a skewed clock)."""
    real_time, real_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + seconds)
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + int(seconds * 1e9))


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def test_expiry_and_stamps_follow_the_servers_clock(
    store: RedisStore, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    x_key = namespace_keys(store.config.prefix, ("c",))[3]
    # a writer whose clock runs an hour late: its item (1 minute) is not born expired
    skew_client_clock(monkeypatch, -3600)
    before = server_ms(client)
    store.put(("c",), "late", {"v": 1}, ttl=1)
    after = server_ms(client)
    monkeypatch.undo()
    expiry = int(client.zscore(x_key, "late") or 0)
    assert before + 60_000 <= expiry <= after + 60_000
    item = store.get(("c",), "late")
    assert item is not None
    assert before <= item.updated_at.timestamp() * 1000 <= after + 1
    assert item.created_at == item.updated_at
    # a writer an hour ahead: its item (0.6 s) expires 0.6 s later by the server's clock
    skew_client_clock(monkeypatch, 3600)
    store.put(("c",), "early", {"v": 2}, ttl=0.01)
    assert store.get(("c",), "early") is not None
    time.sleep(0.8)
    assert store.get(("c",), "early") is None
    assert [i.key for i in store.search(("c",))] == ["late"]


def test_a_virtual_clock_in_the_config_drives_expiry(store: RedisStore) -> None:
    now = [1_900_000_000_000]
    store.config.clock = lambda: now[0]
    store.put(("v",), "k", {"v": 1}, ttl=1)
    item = store.get(("v",), "k")
    assert item is not None and item.updated_at.timestamp() * 1000 == now[0]
    now[0] += 59_999
    assert store.get(("v",), "k", refresh_ttl=False) is not None
    now[0] += 1
    assert store.get(("v",), "k") is None


def lost_part(error: StoreItemLostError) -> tuple[tuple[str, ...], str, str]:
    return error.namespace, error.key, error.what


def test_an_evicted_key_of_an_item_is_a_clear_error(store: RedisStore, client: redis.Redis) -> None:
    h, m, *_ = namespace_keys(store.config.prefix, ("e", "f"))
    store.put(("e", "f"), "k1", {"v": 1})
    store.put(("e", "f"), "k2", {"v": 2})
    client.unlink(m)  # as an eviction would
    with pytest.raises(StoreItemLostError) as lost:
        store.get(("e", "f"), "k1")
    assert lost_part(lost.value) == (("e", "f"), "k1", "created_at")
    assert m in str(lost.value) and "maxmemory-policy" in str(lost.value)
    with pytest.raises(StoreItemLostError) as lost:
        store.search(("e",))
    assert lost_part(lost.value) == (("e", "f"), "k2", "created_at")
    # the items are still there: listed
    assert store.list_namespaces() == [("e", "f")]
    # the documented repair: put the item again (created_at restarts) or delete it
    store.put(("e", "f"), "k1", {"v": 3})
    again = store.get(("e", "f"), "k1")
    assert again is not None and again.value == {"v": 3}
    assert again.created_at == again.updated_at
    store.delete(("e", "f"), "k2")
    assert [(i.key, i.value) for i in store.search(("e",))] == [("k1", {"v": 3})]
    # a lost value is no silent miss either
    client.unlink(h)
    with pytest.raises(StoreItemLostError) as lost:
        store.get(("e", "f"), "k1")
    assert lost_part(lost.value) == (("e", "f"), "k1", "value")
    with pytest.raises(StoreItemLostError):
        store.search(("e",))


def test_pages_of_one_search_neither_skip_nor_repeat_under_concurrent_updates(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paging, "PAGE_MIN", 3)
    monkeypatch.setattr(paging, "PAGE_MAX", 3)
    for n in range(10):
        store.put(("p",), f"k{n}", {"n": n})
    rounds = core.run_batch(store.config, [SearchOp(("p",), limit=20)])
    calls = next(rounds)
    pages = 0
    try:
        while True:
            if calls[0][1] == "store_page":
                pages += 1
                if pages == 2:  # between the first page and the second
                    store.put(("p",), "new", {"n": 10})  # in front
                    store.put(("p",), "k0", {"n": 0})  # from the back to the front
                if pages == 3:
                    store.put(("p",), "k8", {"n": 8})  # already returned, updated
                    store.delete(("p",), "k9")  # already returned, deleted
            calls = rounds.send(store._run(calls))
    except StopIteration as done:
        (found,) = done.value
    assert pages == 4
    assert [i.key for i in found] == ["k9", "k8", "k7", "k6", "k5", "k4", "k3", "k2", "k1"]


def test_pages_break_ties_of_updated_at_on_the_key(
    store: RedisStore, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items of one updated_at (written by an older release: a put now stamps above its
    namespace's newest) are paged in the index's order, the key descending byte by byte."""
    monkeypatch.setattr(paging, "PAGE_MIN", 2)
    monkeypatch.setattr(paging, "PAGE_MAX", 2)
    keys = ["a", "b", "ä", "B", "a1"]
    for key in keys:
        store.put(("t",), key, {"k": key})
    z_key = namespace_keys(store.config.prefix, ("t",))[2]
    client.zadd(z_key, {key: 1_800_000_000_000_000 for key in keys})
    found = store.search(("t",), limit=10)
    assert [i.key for i in found] == sorted(keys, key=str.encode, reverse=True)
    assert [i.key for i in found] == ["ä", "b", "a1", "a", "B"]
    assert {i.updated_at.timestamp() for i in found} == {1_800_000_000.0}
