"""What the commands read of a prefix beyond the saver's API, and what it costs.

Every fact about one thread comes from that thread's own keys: its root ``P:th:{T}`` (the
namespaces), the indexes ``P:idx:{T}:N``, ``P:wi:{T}:N`` and ``P:runs:{T}``, and the keys they
lead to (see :mod:`..keys`). Finding every thread is the one thing that needs a SCAN of the
keyspace (there is no registry of threads): :func:`scan_thread_ids` makes one pass.

The commands used are the saver's own (SMEMBERS, ZRANGE, HGET, EXISTS, PTTL, SCAN), plus
ZCARD and MEMORY USAGE where the user may run them: ZCARD falls back to counting with ZRANGE,
MEMORY USAGE to "unknown". Long indexes are read in steps of :data:`ZRANGE_STEP` ids, and
MEMORY USAGE samples :data:`MEMORY_SAMPLES` elements of a key, so no single call holds the
server for long whatever a key holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.cluster import RedisCluster

from ..keys import KeySchema, decode_part, parse_record
from ..sync import RedisSaver
from .common import chunks, no_checkpoints, refused

Client = redis.Redis | RedisCluster

ZRANGE_STEP = 10_000  # ids per ZRANGE call
SCAN_COUNT = 1000
# MEMORY USAGE's default: an estimate from 5 elements of a hash, set or sorted set. SAMPLES 0
# reads every element: 73 ms of blocked server on a global index of 1M members.
MEMORY_SAMPLES = 5
MEMORY_ESTIMATE = f"estimate: MEMORY USAGE of each key, SAMPLES {MEMORY_SAMPLES}"


def text(value: bytes | str) -> str:
    """A reply element as a string (the client returns bytes; its type stubs allow str)."""
    return value.decode() if isinstance(value, bytes) else value


def scan_thread_ids(saver: RedisSaver) -> list[str]:
    """Every thread under the prefix: one SCAN pass over the keyspace."""
    schema = KeySchema(saver.prefix)
    keys = saver.client.scan_iter(match=schema.thread_pattern(), count=SCAN_COUNT)
    return sorted({schema.thread_id_of(k.decode()) for k in keys})


def thread_exists(saver: RedisSaver, thread_id: str) -> bool:
    schema = KeySchema(saver.prefix)
    return bool(saver.client.exists(schema.thread(schema.tag(thread_id))))


def seconds_left(pttl: int) -> int | None:
    """PTTL's reply as TTL gives it (rounded seconds), None for a key without expiry. PTTL,
    not TTL: it is one of the saver's commands, TTL is not."""
    return (pttl + 500) // 1000 if pttl >= 0 else None


def namespaces(client: Client, schema: KeySchema, thread_id: str) -> list[str]:
    members = client.smembers(schema.thread(schema.tag(thread_id)))
    return sorted(decode_part(text(m)) for m in members)


@dataclass
class ThreadInfo:
    """What a thread's root and the tail of its indexes say: its newest checkpoint (ids sort
    lexically in time order) and the seconds before the root expires."""

    thread_id: str
    ttl: int | None = None
    newest_id: str = ""
    newest_ns: str = ""


def thread_infos(saver: RedisSaver, thread_ids: Sequence[str]) -> list[ThreadInfo]:
    """:class:`ThreadInfo` of each thread, pipelined: SMEMBERS and PTTL of each root, then
    the last id of each namespace index."""
    schema = KeySchema(saver.prefix)
    infos: list[ThreadInfo] = []
    for chunk in chunks(thread_ids):
        pipe = saver.client.pipeline(transaction=False)
        for thread_id in chunk:
            root = schema.thread(schema.tag(thread_id))
            pipe.smembers(root)
            pipe.pttl(root)
        replies = pipe.execute()
        pairs: list[tuple[ThreadInfo, str]] = []
        for i, thread_id in enumerate(chunk):
            members, pttl = replies[2 * i], int(replies[2 * i + 1])
            info = ThreadInfo(thread_id, ttl=seconds_left(pttl))
            infos.append(info)
            pairs += [(info, decode_part(m.decode())) for m in sorted(members)]
        for pair_chunk in chunks(pairs):
            pipe = saver.client.pipeline(transaction=False)
            for info, ns in pair_chunk:
                pipe.zrange(schema.index(schema.tag(info.thread_id), ns), -1, -1)
            for (info, ns), newest in zip(pair_chunk, pipe.execute(), strict=True):
                if newest and newest[0].decode() > info.newest_id:
                    info.newest_id, info.newest_ns = newest[0].decode(), ns
    return infos


def index_ids(client: Client, index: str) -> list[str]:
    """Every id of a namespace index, oldest first, :data:`ZRANGE_STEP` per call."""
    ids: list[str] = []
    while True:
        replies: list[Any] = client.zrange(index, len(ids), len(ids) + ZRANGE_STEP - 1)
        step = [text(i) for i in replies]  # without scores: plain members
        ids += step
        if len(step) < ZRANGE_STEP:
            return ids


def index_sizes(client: Client, indexes: Sequence[str]) -> list[int]:
    """The number of ids in each index: ZCARD, pipelined; for a user that may not run ZCARD
    (it is not one of the saver's commands), counted with ZRANGE."""
    try:
        sizes: list[int] = []
        for chunk in chunks(indexes):
            pipe = client.pipeline(transaction=False)
            for index in chunk:
                pipe.zcard(index)
            sizes += [int(n) for n in pipe.execute()]
        return sizes
    except redis.exceptions.NoPermissionError:
        return [len(index_ids(client, index)) for index in indexes]


def checkpoint_count(saver: RedisSaver, thread_id: str, ns: str | None = None) -> int:
    """Checkpoints of a thread: of one namespace, or of all of them."""
    schema = KeySchema(saver.prefix)
    tag = schema.tag(thread_id)
    spaces = namespaces(saver.client, schema, thread_id) if ns is None else [ns]
    return sum(index_sizes(saver.client, [schema.index(tag, n) for n in spaces]))


@dataclass
class ThreadKeys:
    """The keys of one thread that exist, found from its root, with its checkpoints per
    namespace."""

    thread_id: str
    keys: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # namespace -> checkpoints

    @property
    def checkpoints(self) -> int:
        return sum(self.counts.values())


def _blob_key(schema: KeySchema, tag: str, ns: str, ref: str) -> str:
    """The blob key of a ref ``C:V`` from a checkpoint's ``bv`` field (both parts encoded)."""
    channel, version = ref.split(":", 1)
    return schema.blob(tag, ns, decode_part(channel), decode_part(version))


def walk_thread(saver: RedisSaver, thread_id: str) -> ThreadKeys:
    """Every key the thread's root and indexes lead to, kept if it exists: the root, runs,
    ttl, values (P:tv), bounds (P:tb) and gc keys; per namespace its indexes, deadline
    ledger, checkpoints, writes and the blobs the checkpoints' ``bv`` fields name; the run
    indexes. Costs what the thread holds (every record is read whole)."""
    client, schema = saver.client, KeySchema(saver.prefix)
    tag = schema.tag(thread_id)
    found = ThreadKeys(thread_id)
    candidates = [
        schema.thread(tag),
        schema.runs(tag),
        schema.thread_ttl(tag),
        schema.thread_values(tag),
        schema.thread_bounds(tag),
        schema.gc(tag),
    ]
    runs = client.smembers(schema.runs(tag))
    candidates += [schema.run(tag, decode_part(text(r))) for r in runs]
    blobs: set[str] = set()
    for ns in namespaces(client, schema, thread_id):
        ids = index_ids(client, schema.index(tag, ns))
        found.counts[ns] = len(ids)
        with_writes = [text(i) for i in client.smembers(schema.writes_index(tag, ns))]
        checkpoints = [schema.checkpoint(tag, ns, i) for i in ids]
        candidates += [schema.index(tag, ns), schema.writes_index(tag, ns), *checkpoints]
        candidates.append(schema.ledger(tag, ns))
        candidates += [schema.writes(tag, ns, i) for i in with_writes]
        for chunk in chunks(checkpoints):
            for refs in record_fields(client, chunk, b"bv"):
                if refs:
                    # (values, then after ",," the bases some of them are stored against)
                    blobs.update(
                        _blob_key(schema, tag, ns, r) for r in refs.decode().split(",") if r
                    )
    candidates += sorted(blobs)
    found.keys = existing(client, candidates)
    return found


def record_fields(client: Client, keys: Sequence[str], name: bytes) -> list[bytes | None]:
    """One field of each checkpoint record (None where there is none), of either layout: a
    string (keys.parse_record) or, written before it, a hash."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
    found: list[bytes | None] = []
    for key, packed in zip(keys, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(packed, bytes):
            found.append(parse_record(packed).get(name))
        elif isinstance(packed, redis.exceptions.ResponseError) and "WRONGTYPE" in str(
            packed
        ):  # a record written as a hash
            value = client.hget(key, name.decode())
            found.append(value if isinstance(value, bytes) else None)
        elif isinstance(packed, Exception):
            raise packed
        else:
            found.append(None)
    return found


def existing(client: Client, keys: Sequence[str]) -> list[str]:
    """The keys that exist, in order (EXISTS of each, pipelined)."""
    present: list[str] = []
    for chunk in chunks(keys):
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.exists(key)
        present += [k for k, n in zip(chunk, pipe.execute(), strict=True) if n]
    return present


@dataclass
class Memory:
    """MEMORY USAGE of some keys: the size of each (None when the user may not ask), and what
    the numbers are."""

    sizes: list[int] | None
    note: str

    @property
    def total(self) -> int | None:
        return None if self.sizes is None else sum(self.sizes)


def memory_usage(client: Client, keys: Sequence[str | bytes]) -> Memory:
    """MEMORY USAGE ... SAMPLES 5 of each key, pipelined; 0 for a key gone meanwhile."""
    sizes: list[int] = []
    try:
        for chunk in chunks(keys):
            pipe = client.pipeline(transaction=False)
            for key in chunk:
                pipe.memory_usage(key, samples=MEMORY_SAMPLES)
            sizes += [int(size or 0) for size in pipe.execute()]
    except redis.exceptions.ResponseError as exc:  # not allowed, or renamed away
        return Memory(None, f"unknown: {refused('MEMORY USAGE', exc)}")
    return Memory(sizes, MEMORY_ESTIMATE)


def require_thread(saver: RedisSaver, thread_id: str) -> None:
    if not thread_exists(saver, thread_id):
        raise no_checkpoints(saver, thread_id)
