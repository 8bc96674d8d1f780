"""Virtual time for expiry tests: make keys age without sleeping.

``advance_time(client, prefix, seconds)`` does to every key under ``prefix:`` what ``seconds``
of waiting would do to its expiry: a key with a PTTL is given ``PTTL - seconds`` (PEXPIRE), or
unlinked when that is not positive. Keys without an expiry are left alone. Only keys under the
prefix are touched, so it is safe on a server shared with other tests.

The deadline ledgers (``P:dl:*``, lua/include/ledger.lua) hold absolute deadlines in seconds of
the server's clock: they move ``seconds`` (rounded up) earlier, as if that time had passed, so
that a record the virtual time expired reads as expired, not as evicted. So do the deadlines of
the registry of live threads (``P:alive``, lua/thread_deadlines.lua): a thread the virtual time
expired whole reads as new, not as evicted whole.
"""

from __future__ import annotations

import math

import redis

SCAN_COUNT = 1000


def advance_time(client: redis.Redis, prefix: str, seconds: float) -> int:
    """Age every key under ``prefix:*`` by ``seconds``; returns the number of keys unlinked."""
    step_ms = int(seconds * 1000)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=SCAN_COUNT))
    unlinked = 0
    for start in range(0, len(keys), SCAN_COUNT):
        chunk = keys[start : start + SCAN_COUNT]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.pttl(key)
        ttls = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for key, pttl in zip(chunk, ttls, strict=True):
            if pttl is None or pttl <= 0:
                continue  # -1: no expiry, -2: already gone
            left = pttl - step_ms
            if left > 0:
                pipe.pexpire(key, left)
            else:
                pipe.unlink(key)
                unlinked += 1
        pipe.execute()
    step = math.ceil(seconds)
    for key in keys:
        if ":dl:" not in (key.decode() if isinstance(key, bytes) else key):
            continue
        deadlines = client.hgetall(key)
        # (an entry: "<deadline> <the thread's ttl setting>", lua/include/ledger.lua)
        entries = {k: v.split(b" ", 1) for k, v in deadlines.items()}
        aged = {
            k: b"%d %s" % (int(deadline) - step, setting)
            for k, (deadline, setting) in entries.items()
            if int(deadline) != 0
        }
        if aged:
            client.hset(key, mapping=aged)
    live_threads = f"{prefix}:alive"
    # (a negative score is a forgotten thread's hold, minus the second it ends)
    noted = client.zrange(live_threads, 0, -1, withscores=True)
    aged_deadlines = {tag: score - step if score > 0 else score + step for tag, score in noted}
    if aged_deadlines:
        client.zadd(live_threads, aged_deadlines)
    return unlinked


def expire_record(client: redis.Redis, keys: object, tag: str, ns: str, checkpoint_id: str) -> None:
    """Make one checkpoint record expire now, as its ttl running out would: the record goes,
    and its deadline in the ledger is in the past (an unlink alone reads as an eviction)."""
    from langgraph.checkpoint.rediskv.keys import KeySchema

    assert isinstance(keys, KeySchema)
    assert client.unlink(keys.checkpoint(tag, ns, checkpoint_id)) == 1
    if client.hexists(keys.ledger(tag, ns), checkpoint_id):
        setting = client.hget(keys.ledger(tag, ns), checkpoint_id).split(b" ", 1)[1]
        client.hset(keys.ledger(tag, ns), checkpoint_id, b"1 " + setting)
