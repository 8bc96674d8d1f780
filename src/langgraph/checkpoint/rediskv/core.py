"""The saver's logic, free of I/O (in the sans-I/O style of h11).

Every operation is a generator. It yields *requests* (:class:`ScriptCall`, :class:`ScanKeys`,
:class:`Batch`), receives each reply through ``send()``, and returns its result. A streaming
operation (``list_checkpoints``) also yields :class:`CheckpointTuple` items, meant for the
caller. :mod:`.sync` and :mod:`.aio` drive these generators over a sync or an asyncio redis-py
client, standalone or cluster; nothing here knows which.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import random
import re
import secrets
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import zstandard
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from redis.exceptions import NoScriptError, OutOfMemoryError, RedisError, ResponseError

from . import bulk, lists
from .canonical import canonical
from .compression import (
    DEFAULT_LEVEL,
    REF_MARK,
    REF_MAX_SHARE,
    REF_MIN_SIZE,
    Base,
    BaseCache,
    ZstdSerializer,
    with_base_mark,
    with_compression,
)
from .eviction import CheckpointLostError, warn_of_fall_back
from .keys import (
    THREADS_BY_VALUE,
    KeySchema,
    blob_ref,
    decode_part,
    encode_part,
    metadata_index_suffix,
    pack_fields,
    parse_record,
    tag_of,
)
from .settings import TTLSettings

T = TypeVar("T")
Arg = str | bytes | int

# list pages: at most this many checkpoints per script call (one round trip for limit <= 100),
# and at most this many ids examined per call while a filter rejects them (about 10 ms of
# server time; see benchmarks/server_time.py).
LIST_PAGE = 100
# threads-by-value candidates read per call (a value of fewer threads is read whole, at
# once), and visited per round trip at the least
CANDIDATE_CHUNK = 10_000
CANDIDATE_GROUP = 8
# on a cluster: how long a saver trusts that the threads-by-value lists are complete before it
# asks again (a round trip a minute, where every filtered listing asked)
READY_KNOWN_FOR = 60.0
# on a cluster: candidate threads asked their newest score per round trip (see lists.probe)
PROBE_GROUP = 100
# A merge of more threads than this (list(None) over a large store) keeps pages of at most
# this many of them, and of the others only the id of their next checkpoint: the client's
# memory stays at LIST_WINDOW pages and an id per thread, however many threads and
# checkpoints the listing goes through (see _merge_streams).
LIST_WINDOW = 256
HEAD_GROUP = 32  # heads whose pages are read in one round trip
# list(None) without a limit goes thread by thread: the first pages of this many threads
# (of at most FIRST_PAGE checkpoints each) in one round trip, a thread's further pages alone.
THREAD_GROUP = 32
FIRST_PAGE = 4
# list(None, limit=L) over every thread chooses the ids first: each thread's newest FIRST_IDS
# (at most L), more only while they may be among the newest L, about SELECT_IDS ids a round
# trip (see _select_newest)
FIRST_IDS = 10
SELECT_IDS = 5000
LIST_SCAN_BUDGET = 1000
# A thread with more namespaces than this is listed in chunks of them, merged by the client,
# so that no call reads the heads of more than this many namespace indexes.
NAMESPACE_CHUNK = 500
# The metadata keys indexed by default, and the longest canonical value that gets an entry
# (longer values, and None, are still filtered, by the scan).
# run_id: what delete_for_runs and LangGraph's run lookups search by. "source" and "step"
# are not indexed by default: a few values each, so an index on them hardly narrows a search,
# and each indexed key costs a sorted-set entry per checkpoint (memory) and its upkeep (CPU).
DEFAULT_INDEXED_METADATA = ("run_id",)
MAX_INDEXED_VALUE = 256
# Metadata keys with few distinct values: another indexed filter key is a better start.
_UNSELECTIVE = frozenset({"source", "step"})
# Threads-by-value indexes (P:tm, standalone servers): every thread that has a checkpoint with
# a metadata value that thread_indexed() takes is listed under it, so that list(None, filter)
# on any key visits only the threads that may match, newest first, with no option to set.
# Keys left out: run_id (indexed per checkpoint by default) and LangGraph's step (a number
# anyway). The same rule: thread_indexed() in lua/include/keyschema.lua.
THREAD_INDEX_SKIPS = frozenset({"step", "run_id"})
MAX_THREAD_INDEXED = 130  # canonical JSON: a string of up to 128 characters
# SCAN COUNT hint, and how many per-thread script calls go into one pipeline.
SCAN_COUNT = 1000
BATCH_SIZE = 500
# checkpoints a reindex_thread call visits at most
REINDEX_STEP = 500
# on_lost_checkpoint="fall_back": checkpoint ids listed per call while looking for the newest
# complete one
FALL_BACK_PAGE = 50
# proto-max-bulk-len cannot be set below 1 MB, and is 512 MB unless set: only calls with an
# argument longer than the first need a look at the server's limit.
MIN_BULK_LIMIT = 1 << 20
DEFAULT_BULK_LIMIT = 512 << 20
# A put retried after "REAPING" or missing blobs: each retry makes progress, so a few suffice.
_PUT_ATTEMPTS = 5
# LangGraph's trigger channels ("branch:to:<node>", written with None every time a node is
# triggered) are stored inside the checkpoint record instead of as blob keys: a blob key costs
# about 180 bytes of Redis memory and a ref in `bv`, the value a byte in the record. Only
# these, and only None: any other channel may be a DeltaChannel, or become one, whose stored
# values get_delta_channel_history finds as seeds through `bv` (lua/include/delta.lua). A
# trigger channel is not (a state key of that name would collide with LangGraph's own).
TRIGGER_CHANNEL_PREFIX = "branch:to:"
# The stored checkpoint of a record holding inline values starts with this mark. It cannot
# start a stored value otherwise ("u:" escapes only types that start with a mark, "u:" among
# them, and the base mark is "u:b:": compression.py), and
# a reader older than the mark refuses it ("Unknown serialization type") rather than
# returning the checkpoint without those values.
INLINE_MARK = b"u:i:"
REF_MARK_B = REF_MARK.encode()
READ_BASES = 8 << 20  # bytes of bases kept decompressed for reads (see SaverCore._base)

PRUNE_STRATEGIES = {
    "keep_latest": "prune",
    "delete_all": "delete_thread",
    "delete": "delete_thread",
}


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """Run ``lua/<name>.lua``; the reply is the script's reply."""

    name: str
    keys: Sequence[str]
    args: Sequence[Arg]


@dataclass(frozen=True, slots=True)
class ScanKeys:
    """Every key matching ``match``, by SCAN (on a cluster: on every primary); the reply is
    the list of keys."""

    match: str
    count: int = SCAN_COUNT


@dataclass(frozen=True, slots=True)
class ScanPage:
    """One SCAN step over the keys matching ``match`` (on a cluster: the primaries one after
    the other), from ``cursor`` ("" for the first step); the reply is (the cursor of the next
    step, or None once done, the keys of this one). SCAN's promise holds: a key present
    throughout comes at least once (twice, rarely: when the keyspace shrinks meanwhile)."""

    match: str
    cursor: str = ""
    count: int = SCAN_COUNT


@dataclass(frozen=True, slots=True)
class Batch:
    """Script calls sent in one pipeline (not a transaction; on a cluster, one per node); the
    reply is their replies, in order."""

    calls: Sequence[ScriptCall]


@dataclass(frozen=True, slots=True)
class NodeBatch(Batch):
    """A Batch of read-only calls, one per thread, each reading the first key it declares,
    that a cluster may answer with one call of script ``name`` per node instead: ``args``,
    then the first key of each call whose slot that node serves (lua/thread_states.lua).
    A node whose call fails (a slot moved or moving, a map out of date, a restart) has its
    threads' calls sent as the Batch would send them, and so does a node asked for one
    thread only; a transport that knows no better sends the Batch. Reply: the calls'
    replies, in order, whichever way they went."""

    name: str = ""
    args: Sequence[Arg] = ()


Request = ScriptCall | ScanKeys | ScanPage | Batch
Op = Generator[Request, Any, T]
Stream = Generator[Request | CheckpointTuple, Any, None]


class SerializationError(TypeError):
    """A value could not be serialized; nothing was written."""


class ValueTooLargeError(ValueError):
    """A value is larger than the server accepts (its proto-max-bulk-len); nothing was
    written."""


class ServerFullError(OutOfMemoryError):
    """The server is over its ``maxmemory`` and refused a write; nothing was written."""


def explain_response_error(request: Request, exc: Exception) -> Exception:
    """A clearer error for a server reply that the caller's input caused, else ``exc``."""
    if isinstance(exc, OutOfMemoryError) or str(exc).startswith("OOM"):
        calls = request.calls if isinstance(request, Batch) else [request]
        names = sorted({c.name for c in calls if isinstance(c, ScriptCall)})
        return ServerFullError(
            f"the Redis server is over its maxmemory and refused {', '.join(names)}; nothing "
            "was written. Free memory (delete or prune threads, use a ttl) or raise maxmemory "
            f"({exc})"
        )
    if str(exc).startswith("LOST "):  # a read found a key of a thread evicted (records.lua)
        key, what = str(exc)[5:].split(" ", 1)
        return CheckpointLostError(KeySchema.thread_from_tag(tag_of(key) or "{}"), what, key)
    if "near '#'" in str(exc):
        return ResponseError(
            "the server cannot run this saver's scripts: they use Redis 7 script flags, so "
            f"the saver needs Redis 7.0 or later, or Valkey 7.2 or later ({exc})"
        )
    if "bulk length" not in str(exc):
        return exc
    return ValueTooLargeError(
        f"a serialized value of {largest_arg(request)} bytes is larger than the server "
        f"accepts (its proto-max-bulk-len); nothing was written ({exc})"
    )


def node_groups(
    request: NodeBatch, node_of: Callable[[str], Any]
) -> tuple[list[Any], list[tuple[Any, list[int]]], list[int]]:
    """How a cluster transport sends a NodeBatch: the list of its replies to fill in, its
    calls grouped by the node that ``node_of`` (the client's slot map) says serves their
    first key, for the nodes with two or more, and the calls to send as a Batch (one alone
    on its node)."""
    groups: dict[str, tuple[Any, list[int]]] = {}
    for i, call in enumerate(request.calls):
        node = node_of(call.keys[0])
        groups.setdefault(node.name, (node, []))[1].append(i)
    together = [(node, indexes) for node, indexes in groups.values() if len(indexes) > 1]
    alone = [i for _, indexes in groups.values() if len(indexes) == 1 for i in indexes]
    return [None] * len(request.calls), together, alone


def take_node_replies(
    groups: Sequence[tuple[Any, list[int]]], results: Sequence[Any], out: list[Any]
) -> tuple[list[int], bool]:
    """Fill ``out`` with the replies of a NodeBatch's calls by node (``results``: each node's
    reply, or the RedisError its call raised); the calls of the nodes that failed, to send
    as a Batch, and whether one of them had lost its scripts (NOSCRIPT: load them again)."""
    failed: list[int] = []
    lost = False
    for (_, indexes), replies in zip(groups, results, strict=True):
        if isinstance(replies, RedisError):
            lost = lost or isinstance(replies, NoScriptError)
            failed += indexes
            continue
        for i, reply in zip(indexes, replies, strict=True):
            out[i] = reply
    return failed, lost


def scan_position(cursor: str) -> tuple[int, int]:
    """A ScanPage cursor as (which primary, in name order; its SCAN cursor)."""
    at, _, rest = cursor.partition(":")
    scan = rest.partition(":")[0]
    return (int(at), int(scan)) if scan else (0, 0)


def next_scan_position(at: int, scan: int, nodes: int, layout: str = "") -> str | None:
    """The ScanPage cursor after a SCAN step of primary ``at`` replied ``scan``; on a cluster
    it carries the digest of the layout the listing began with (``layout``)."""
    suffix = f":{layout}" if layout else ""
    if scan:
        return f"{at}:{scan}{suffix}"
    return f"{at + 1}:0{suffix}" if at + 1 < nodes else None


class ListingInterruptedError(RuntimeError):
    """A listing over every thread of a Redis Cluster met slots moved, or being moved,
    between its SCAN steps (see check_cluster_layout)."""


def check_cluster_layout(cursor: str, replies: Iterable[bytes | str]) -> str:
    """The digest of which primary serves which slots, from each primary's CLUSTER NODES
    reply (its own line), for the ScanPage cursor. A listing of every thread walks the
    primaries one after another, a SCAN step at a time, while its caller consumes it: a
    slot moved meanwhile from a primary walked to one not walked yet would give its threads
    twice, and one moved the other way would lose them. So a step refuses to go on when the
    layout differs from the one in ``cursor`` (where the listing began), or when a slot is
    being moved (a migrating or importing mark), with ListingInterruptedError."""
    own: list[str] = []
    moving = False
    for reply in replies:
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        for line in text.splitlines():
            fields = line.split()
            if len(fields) >= 8 and "myself" in fields[2].split(","):
                marks = [s for s in fields[8:] if s.startswith("[")]
                moving = moving or bool(marks)
                slots = ",".join(s for s in fields[8:] if not s.startswith("["))
                own.append(f"{fields[0]}={slots}")
    layout = hashlib.sha1("|".join(sorted(own)).encode()).hexdigest()[:16]
    began = cursor.split(":")[2] if cursor.count(":") >= 2 else layout
    if moving or layout != began:
        raise ListingInterruptedError(
            "list(None) on a Redis Cluster: slots moved, or were being moved, while the "
            "listing walked the primaries one after another, so it could miss threads or give "
            "some twice. Nothing stored is affected: list again once the move is done."
        )
    return layout


def largest_arg(request: Request) -> int:
    """The length of the longest argument a request sends."""
    calls = request.calls if isinstance(request, Batch) else [request]
    # (on every call: list comprehensions cost half a generator's time here)
    return max(
        [
            max([len(a) for a in call.args if not isinstance(a, int)], default=0)
            for call in calls
            if isinstance(call, ScriptCall)
        ],
        default=0,
    )


def refuse_oversized(request: Request, limit: int) -> None:
    """Raise ValueTooLargeError, before anything is sent, for a request with an argument
    longer than the server's proto-max-bulk-len: the server would drop the connection, and
    with it every other call in flight on it."""
    largest = largest_arg(request)
    if largest > limit:
        raise ValueTooLargeError(
            f"a serialized value of {largest} bytes is larger than the server accepts (its "
            f"proto-max-bulk-len is {limit}); nothing was written"
        )


def thread_id_of(config: RunnableConfig | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise ValueError(
            'config has no "thread_id": pass config={"configurable": {"thread_id": ...}} '
            "(the thread_id names the conversation whose checkpoints are read or written)"
        )
    return str(thread_id)


@dataclass(frozen=True, slots=True)
class SaverCore:
    """Key building, argument encoding and reply decoding for one saver."""

    keys: KeySchema
    serde: SerializerProtocol  # the saver's serializer; values are stored with `storage`
    ttl: TTLSettings | None = None
    # metadata keys with a global index (empty on a cluster, where it cannot be kept atomic)
    indexed: tuple[str, ...] = ()
    # False on a cluster: no global metadata index at all
    global_index: bool = True
    # True on a cluster: threads-by-value lists written ahead by the client (see .lists)
    cluster_lists: bool = False
    # what this saver wrote of the threads' list entries (mutable on purpose: a cache)
    list_cache: lists.ListCache = dataclasses.field(default_factory=lists.ListCache)
    # set once the indexed keys are in the registry (mutable on purpose: a per-saver cache)
    registered: list[bool] = dataclasses.field(default_factory=list)
    # set once the prefix's stored format has been checked (see .storeformat; mutable on
    # purpose: a per-saver cache)
    format_checked: list[bool] = dataclasses.field(default_factory=list)
    # on a cluster: when the threads-by-value lists were last known to be complete (they stay
    # so, but for a store emptied and refilled without them, as a restored backup of an older
    # version), saving a listing the round trip that asks for READY_KNOWN_FOR seconds
    # (mutable on purpose: a per-saver cache)
    lists_known_ready: list[float] = dataclasses.field(default_factory=list)
    # zstd level of stored values, None for uncompressed (see .compression)
    compression: int | None = DEFAULT_LEVEL
    # keep only the newest this many checkpoints per namespace (0: all), see lua/include/trim.lua
    keep_last: int = 0
    # "fall_back": get_tuple of the latest checkpoint that lost a value answers the newest
    # one still complete (README, Eviction); "raise": CheckpointLostError
    on_lost_checkpoint: str = "raise"
    # the bases channel values are compressed against (mutable on purpose: a per-saver cache)
    bases: BaseCache = dataclasses.field(default_factory=BaseCache)
    # the bases of the values read lately, by their stored bytes (see _base)
    read_bases: BaseCache = dataclasses.field(default_factory=lambda: BaseCache(READ_BASES))
    # the serializer wrapped for storage: compression inside any encryption
    storage: SerializerProtocol = dataclasses.field(init=False)
    # its layers: the compression, and the cipher of an EncryptedSerializer (or None)
    zstd: ZstdSerializer = dataclasses.field(init=False)
    cipher: CipherProtocol | None = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        storage = with_compression(self.serde, self.compression)
        object.__setattr__(self, "storage", storage)
        cipher = storage.cipher if isinstance(storage, EncryptedSerializer) else None
        zstd = storage.serde if isinstance(storage, EncryptedSerializer) else storage
        assert isinstance(zstd, ZstdSerializer)
        object.__setattr__(self, "zstd", zstd)
        object.__setattr__(self, "cipher", cipher)

    def with_serde(self, serde: SerializerProtocol) -> SaverCore:
        return replace(self, serde=serde)

    @property
    def ttl_seconds(self) -> int:
        return self.ttl.seconds if self.ttl else 0

    @property
    def read_ttl_seconds(self) -> int:
        """get_tuple's refresh argument: the default ttl, or -1 for no refresh on read."""
        return self.ttl.seconds if self.ttl and self.ttl.refresh_on_read else -1

    # -- encoding --------------------------------------------------------------------------
    def dumps(self, value: Any, what: str, serde: SerializerProtocol | None = None) -> bytes:
        """``b"<type>\\0<bytes>"``: the value as stored (compressed when it pays)."""
        try:
            type_, data = (serde or self.storage).dumps_typed(value)
        except Exception as exc:
            raise SerializationError(
                f"cannot serialize {what} ({type(value).__name__}): {exc}"
            ) from exc
        return type_.encode() + b"\0" + bytes(data)

    def loads(self, stored: bytes) -> Any:
        type_, _, data = stored.partition(b"\0")
        return self.storage.loads_typed((type_.decode(), data))

    def dumps_channel(
        self, key: tuple[str, str, str], ref: str, value: Any, use_base: bool = True
    ) -> tuple[bytes, Base | None]:
        """A channel value as stored, and the base it was compressed against (None: stored in
        full). ``key``: (hash tag, encoded namespace, channel), where the base
        comes from; a full value of a size worth it becomes the next base there."""
        zstd, cipher = self.zstd, self.cipher
        try:
            type_, raw = zstd.inner.dumps_typed(value)
            raw = bytes(raw)
            # keep_last=1 keeps one checkpoint: a value and its base would take more than the
            # value in full
            worth_a_base = (
                zstd.level is not None and len(raw) >= REF_MIN_SIZE and self.keep_last != 1
            )
            base = self.bases.get(key) if use_base and worth_a_base else None
            packed = None
            if base is not None and base.ref != ref:
                packed = zstd.pack_against(type_, raw, base)
                if len(packed[1]) > REF_MAX_SHARE * len(base.stored):
                    packed = None  # too far from its base: a new base
            if packed is None:
                base = None
                packed = zstd.pack(type_, raw)
            stored_type, data = packed
            if cipher is not None:
                cipher_name, data = cipher.encrypt(data)
                stored_type = f"{stored_type}+{cipher_name}"
        except Exception as exc:
            raise SerializationError(
                f"cannot serialize channel {key[2]!r} ({type(value).__name__}): {exc}"
            ) from exc
        if base is None and worth_a_base:  # the next base: with the mark the put checks
            stored = with_base_mark(stored_type.encode(), bytes(data))
            self.bases.put(key, Base(ref, raw, stored))
        else:
            stored = stored_type.encode() + b"\0" + bytes(data)
        return stored, base

    def _decrypted(self, stored: bytes) -> tuple[str, bytes]:
        """A stored value's type and bytes without the cipher's layer (as EncryptedSerializer
        takes it off: the type ends in "+<cipher>"); as they are without a cipher."""
        type_b, _, data = stored.partition(b"\0")
        type_ = type_b.decode()
        if "+" in type_ and self.cipher is not None:
            type_, cipher_name = type_.split("+", 1)
            data = self.cipher.decrypt(cipher_name, data)
        return type_, data

    def _raw(self, stored: bytes) -> tuple[str, bytes]:
        """The serializer's (type, bytes) of a value stored in full."""
        return self.zstd.unpack(*self._decrypted(stored))

    def loads_channel(
        self, ref: bytes, stored: bytes, by_ref: dict[bytes, bytes]
    ) -> tuple[Any, Base | None]:
        """A channel value, and the base for its channel's next values: the one it was
        compressed against, or itself when stored in full (None when too small for one).
        ``by_ref``: the other blobs of the checkpoint, among them any base."""
        try:
            return self._loads_channel(ref, stored, by_ref)
        except (ValueError, zstandard.ZstdError):
            if self.cipher is None and b"+" in stored.partition(b"\0")[0]:
                return self.loads(stored), None  # encrypted, no cipher: the serializer says so
            raise

    def _loads_channel(
        self, ref: bytes, stored: bytes, by_ref: dict[bytes, bytes]
    ) -> tuple[Any, Base | None]:
        if not stored.startswith(REF_MARK_B):
            type_, raw = self._raw(stored)
            value = self.zstd.inner.loads_typed((type_, raw))
            if self.zstd.level is None or len(raw) < REF_MIN_SIZE:
                return value, None
            return value, Base(ref.decode(), raw, stored)
        type_b = stored.partition(b"\0")[0]
        base_ref = type_b[len(REF_MARK) : type_b.index(b";")].decode()
        base_stored = by_ref.get(base_ref.encode())
        if base_stored is None:
            raise ValueError(f"the blob {ref.decode()!r} is read without its base {base_ref!r}")
        base = self._base(base_ref, base_stored)
        inner_type, raw = self.zstd.unpack(*self._decrypted(stored), base)
        value = self.zstd.inner.loads_typed((inner_type, raw))
        return value, base if self.zstd.level is not None else None

    def _base(self, ref: str, stored: bytes) -> Base:
        """The base stored as ``stored``: decompressed and digested once for the values of a
        list page, of a thread's turns (they share few bases)."""
        base = self.read_bases.get(stored)
        if base is None or base.ref != ref:
            base = Base(ref, self._raw(stored)[1], stored)
            self.read_bases.put(stored, base)
        return base

    def canonical(self, value: Any) -> str:
        """The metadata filter form of a value (see :mod:`.canonical`): equal values give
        equal strings in every process, and values of different JSON types never do (``7``
        is not ``"7"``)."""
        # the serializer's own bytes: compressed ones could differ between zstd versions
        return canonical(value, lambda v: self.dumps(v, f"the metadata value {v!r}", self.serde))

    @staticmethod
    def _write_record(task_path: str, channel: str, stored: bytes) -> bytes:
        path_b, channel_b = task_path.encode(), channel.encode()
        return b"".join((f"{len(path_b)}:{len(channel_b)}:".encode(), path_b, channel_b, stored))

    # -- decoding --------------------------------------------------------------------------
    def pending_writes(self, flat: Sequence[bytes]) -> list[PendingWrite]:
        rows: list[tuple[tuple[str, str, int], PendingWrite]] = []
        for field, record in zip(flat[::2], flat[1::2], strict=True):
            task_enc, _, idx = field.decode().rpartition(":")
            task_id = decode_part(task_enc)
            path_len, channel_len, rest = record.split(b":", 2)
            p, c = int(path_len), int(channel_len)
            task_path = rest[:p].decode()
            channel = rest[p : p + c].decode()
            value = self.loads(rest[p + c :])
            rows.append((writes_sort_key(task_path, task_id, int(idx)), (task_id, channel, value)))
        rows.sort(key=lambda row: row[0])
        return [write for _, write in rows]

    def decode_record(
        self,
        thread_id: str,
        record: Sequence[Any],
        warm: bool = False,
        held: Mapping[bytes, Base] | None = None,
    ) -> CheckpointTuple:
        """A checkpoint as a script returns it (include/records.lua's load_checkpoint: its
        record as stored, whose large fields are parsed here, from the byte it gives on, its
        blobs, the writes of its writes hash and its parent's id). ``warm``: remember the
        bases of its channels, as a put that follows it compresses against them. ``held``:
        the bases the call named by their marks, whose values came back as b"" (get_tuple)."""
        ns_enc, raw_id, packed, blobs, hash_writes, parent, large = record
        try:
            fields = parse_record(packed, large - 1)  # (a Lua position: from 1)
            ck, md = fields[b"ck"], fields[b"md"]
        except (ValueError, KeyError) as exc:
            ns_raw, tag = decode_part(ns_enc.decode()), self.keys.tag(thread_id)
            key = self.keys.checkpoint(tag, ns_raw, raw_id.decode())
            raise ValueError(f"corrupt checkpoint record {key}: {exc}") from exc
        # its pending writes: those in its writes hash, then those in the record
        writes = list(hash_writes)
        for name, value in fields.items():
            if name.startswith(b"w:"):
                writes += (name[2:], value)
        ns = decode_part(ns_enc.decode())
        checkpoint_id = raw_id.decode()
        if ck.startswith(INLINE_MARK):
            checkpoint: Checkpoint = self.loads(ck[len(INLINE_MARK) :])
            values: dict[str, Any] = dict(checkpoint["channel_values"])
        else:
            checkpoint = self.loads(ck)
            values = {}
        by_ref = dict(zip(blobs[::2], blobs[1::2], strict=True))
        for ref, stored in by_ref.items():
            if stored == b"":  # (a stored value is never empty: "<type>\0<bytes>")
                base = (held or {}).get(ref)
                if base is None:
                    raise ValueError(f"the blob {ref.decode()!r} came back empty, not held")
                by_ref[ref] = base.stored  # the very bytes: stored with the mark it has
                if self.read_bases.get(base.stored) is None:  # (read without decompressing)
                    self.read_bases.put(base.stored, base)
        tag = self.keys.tag(thread_id) if warm else ""
        for ref, stored in by_ref.items():
            channel = decode_part(ref.split(b":", 1)[0].decode())
            # a channel's first ref is its value; later ones are bases of values
            if stored is None or channel in values:
                continue
            if not warm and not stored.startswith(REF_MARK_B):
                values[channel] = self.loads(stored)
                continue
            try:
                values[channel], base = self.loads_channel(ref, stored, by_ref)
            except ValueError as exc:
                if not stored.startswith(REF_MARK_B):
                    raise  # the serializer's own error, as it was
                # a base gone or changed: say whose value it was
                raise ValueError(
                    f"channel {channel!r} of checkpoint {checkpoint_id!r} in thread "
                    f"{thread_id!r} (namespace {ns!r}) cannot be read: {exc}"
                ) from exc
            if warm and base is not None and self.keep_last != 1:  # (keep_last=1: in full)
                self.bases.put((tag, ns_enc.decode(), channel), base)
        checkpoint["channel_values"] = values
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=self.loads(md),
            parent_config=_config(thread_id, ns, parent.decode()) if parent else None,
            pending_writes=self.pending_writes(writes),
        )

    # -- operations --------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        thread_id = thread_id_of(config)
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns") or ""
        parent_id = configurable.get("checkpoint_id") or ""
        checkpoint_id = checkpoint["id"]
        tag, ns_enc = self.keys.tag(thread_id), encode_part(ns)

        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        body: dict[str, Any] = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        inline = {ch: v for ch, v in values.items() if ch in versions and _inlinable(ch, v)}
        if inline:
            body["channel_values"] = inline
            stored_checkpoint = INLINE_MARK + self.dumps(body, "the checkpoint")
        else:
            stored_checkpoint = self.dumps(body, "the checkpoint")
        full_metadata = get_serializable_checkpoint_metadata(config, metadata)
        stored_metadata = self.dumps(full_metadata, "the checkpoint metadata")
        ref_of = {
            ch: blob_ref(ch, versions[ch]) for ch in values if ch in versions and ch not in inline
        }
        run_id = full_metadata.get("run_id")

        meta_args: list[Arg] = [len(full_metadata)]
        filter_fields: list[tuple[bytes, bytes]] = []
        canonical_values: list[tuple[str, str]] = []
        for key, value in full_metadata.items():
            name, canonical_value = f"m:{key}", self.canonical(value)
            # the key as the record's field names it (an int, a str Enum: its text), which is
            # what the scripts index it by
            text_key = name[2:]
            meta_args += [name, canonical_value, index_suffix(text_key, canonical_value)]
            filter_fields.append((name.encode(), canonical_value.encode()))
            canonical_values.append((text_key, canonical_value))
        # the record's fields the script does not decide, packed here (see put_checkpoint.lua)
        packed_filters = pack_fields(filter_fields)
        packed_large = pack_fields([(b"md", stored_metadata), (b"ck", stored_checkpoint)])
        written: set[str] = set()  # channels whose value goes out with the call
        # channels whose values go out in full: their base is gone or changed, or they are
        # stored again (a blob written anew is full: records sharing it may not list a base)
        in_full: set[str] = set()
        base_of: dict[str, Base] = {}  # channel -> the base its value went out against
        # on a cluster: the threads-by-value list entries written ahead for it (see .lists)
        ahead = lists.Ahead() if self.cluster_lists else None

        def call() -> ScriptCall:
            blob_args: list[Arg] = []
            shared: list[Arg] = []  # refs of blobs stored before: the script checks them
            base_of.clear()
            for channel, ref in ref_of.items():
                if channel in written:
                    stored, base = self.dumps_channel(
                        (tag, ns_enc, channel), ref, values[channel], channel not in in_full
                    )
                    blob_args += [ref, stored]
                    if base is not None:
                        base_of[channel] = base
                else:
                    shared.append(ref)
            # the bases go with the record (after the refs of the values and ",,"): a base
            # lives as long as the values compressed against it, get_tuple reads them too
            bases = {base.ref: base for base in base_of.values()}
            base_args: list[Arg] = []
            for base in bases.values():
                base_args += [base.ref, base.check]
            return ScriptCall(
                "put_checkpoint",
                (
                    self.keys.thread(tag),
                    self.keys.index(tag, ns),
                    self.keys.checkpoint(tag, ns, checkpoint_id),
                ),
                (
                    self.keys.prefix,
                    tag,
                    ns_enc,
                    checkpoint_id,
                    parent_id,
                    packed_filters,
                    packed_large,
                    ",".join(ref_of.values()) + ",," + ",".join(bases),
                    encode_part(str(run_id)) if run_id is not None else "",
                    self.ttl_seconds,
                    ahead.hint() if ahead else self._indexed_arg,
                    self.keep_last,
                    lists.score_arg(id_score(checkpoint_id.encode())),
                    # a put without a ttl sweeps its indexes one time in four (it adds no
                    # entry that can die by expiry; see put_checkpoint.lua)
                    "1" if random.random() < 0.25 else "0",
                    *meta_args,
                    len(blob_args) // 2,
                    *blob_args,
                    len(shared),
                    *shared,
                    len(bases),
                    *base_args,
                ),
            )

        def resend(missing: list[bytes]) -> None:
            # blobs it shares with its parent are gone (expired during a long superstep, or
            # removed by a concurrent prune): store them again with this checkpoint, in full;
            # a base that is gone or changed: send the values compressed against it in full
            for ref in (r.decode() for r in missing):
                users = [channel for channel, base in base_of.items() if base.ref == ref]
                for channel in users:
                    self.bases.drop((tag, ns_enc, channel))
                channels = users or [decode_part(ref.split(":", 1)[0])]
                written.update(channels)
                in_full.update(channels)

        written.update(ch for ch in new_versions if ch in ref_of)
        yield from self.register_metadata_index()
        if ahead is not None:
            score = id_score(checkpoint_id.encode())
            run = str(run_id) if run_id is not None else None
            needs = lists.needs_of(canonical_values, run, score)
            yield from lists.before_put(self, tag, needs, ahead)
        what = f"put of checkpoint {checkpoint_id!r}"
        yield from self._write(thread_id, what, call, resend, ahead)
        return _config(thread_id, ns, checkpoint_id)

    def _write(
        self,
        thread_id: str,
        what: str,
        call: Callable[[], ScriptCall],
        resend: Callable[[list[bytes]], None] | None = None,
        ahead: lists.Ahead | None = None,
    ) -> Op[Any]:
        """Send a write, again after reaping what an earlier delete, prune or copy of the
        thread left ("REAPING"), with the blobs a put found missing (a list reply), or, on a
        cluster, once the threads-by-value lists it needs hold the thread ("INDEX")."""
        for _ in range(_PUT_ATTEMPTS):
            reply = yield call()
            if reply == b"REAPING":
                yield from bulk.finish_reaping(self, thread_id)
            elif ahead is not None and lists.is_index_reply(reply):
                yield from lists.answer(self, self.keys.tag(thread_id), reply, ahead)
            elif isinstance(reply, list) and resend is not None:
                resend(reply)
            else:
                return reply
        raise RuntimeError(
            f"{what} in thread {thread_id!r} did not settle after {_PUT_ATTEMPTS} attempts "
            "(the thread keeps being deleted or pruned meanwhile)"
        )

    @property
    def _indexed_arg(self) -> str:
        """put_checkpoint's ARGV[11]: "-" without a global index, else the indexed keys."""
        if not self.global_index:
            return "-"
        return ",".join(encode_part(k) for k in self.indexed)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> Op[None]:
        thread_id = thread_id_of(config)
        configurable = config["configurable"]
        ns = configurable.get("checkpoint_ns") or ""
        checkpoint_id = configurable.get("checkpoint_id")
        if not checkpoint_id:
            raise ValueError('put_writes needs a config with "checkpoint_id"')
        if not writes:
            return None
        tag = self.keys.tag(thread_id)
        task_enc = encode_part(task_id)
        args: list[Arg] = [
            self.keys.prefix,
            tag,
            encode_part(ns),
            checkpoint_id,
            self.ttl_seconds,
            self.keep_last,
        ]
        for idx, (channel, value) in enumerate(writes):
            slot = WRITES_IDX_MAP.get(channel, idx)
            stored = self.dumps(value, f"the write to channel {channel!r}")
            # special channels (errors, interrupts, ...) replace; regular writes: first wins
            mode = "u" if channel in WRITES_IDX_MAP else "f"
            args += [f"{task_enc}:{slot}", self._write_record(task_path, channel, stored), mode]
        call = ScriptCall(
            "put_writes",
            (
                self.keys.thread(tag),
                self.keys.writes_index(tag, ns),
                self.keys.writes(tag, ns, checkpoint_id),
            ),
            args,
        )
        yield from self._write(thread_id, "put_writes", lambda: call)
        return None

    def get_tuple(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        thread_id = thread_id_of(config)
        ns = config["configurable"].get("checkpoint_ns") or ""
        tag = self.keys.tag(thread_id)
        ns_enc = encode_part(ns)
        # the bases this saver holds of the namespace's channels: the script sends back none
        # of those still stored with the same mark (a chat's base is its history)
        held = {b.ref.encode(): b for b in self.bases.of_namespace(tag, ns_enc) if b.mark}
        held_args: list[Arg] = [len(held)]
        for ref, base in held.items():
            held_args += [ref, base.mark]
        try:
            record = yield ScriptCall(
                "get_tuple",
                (self.keys.index(tag, ns),),
                (
                    self.keys.prefix,
                    tag,
                    ns_enc,
                    get_checkpoint_id(config) or "",
                    self.read_ttl_seconds,
                    *held_args,
                ),
            )
        except CheckpointLostError as lost:
            # (only where the read already failed: the hot path is unchanged)
            if self.on_lost_checkpoint != "fall_back" or lost.what != "value":
                raise
            if get_checkpoint_id(config):
                raise  # a checkpoint asked for by id is that one or none
            return (yield from self._newest_complete(thread_id, ns, lost))
        return self.decode_record(thread_id, record, warm=True, held=held) if record else None

    def _newest_complete(
        self, thread_id: str, ns: str, lost: CheckpointLostError
    ) -> Op[CheckpointTuple | None]:
        """on_lost_checkpoint="fall_back": the newest checkpoint of the namespace that is
        still complete, read by its id (ids newest first, without their values), and one
        warning; ``lost`` again when none is."""
        lost_id: str | None = None
        before: Arg = ""
        while True:
            reply = yield self._list_call(thread_id, ns, "", before, -FALL_BACK_PAGE, (0,))
            for entry in reply[1:]:
                checkpoint_id = entry[1].decode()
                config = {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": checkpoint_id,
                    }
                }
                try:
                    found = yield from self.get_tuple(config)  # type: ignore[arg-type]
                except CheckpointLostError as again:
                    if again.what != "value":
                        raise
                    lost_id = lost_id or checkpoint_id
                    continue
                if found is not None:
                    if lost_id is not None:  # (else a newer complete one came meanwhile)
                        warn_of_fall_back(thread_id, ns, lost_id, lost.key, checkpoint_id)
                    return found
            if reply[0] is None:
                raise lost
            before = reply[0]

    def _list_call(
        self,
        thread_id: str,
        ns: str | Sequence[str] | None,
        only_id: str,
        before: Arg,
        page: int,
        filter_args: Sequence[Arg],
    ) -> ScriptCall:
        """list_checkpoints on one namespace (a str), on the encoded namespaces given (a
        sequence: a chunk of a thread with many), or on every namespace (None)."""
        tag = self.keys.tag(thread_id)
        chunk: tuple[str, ...] = ()
        if ns is None:
            mode, named = "1", str(NAMESPACE_CHUNK)
        elif isinstance(ns, str):
            mode, named = "0", encode_part(ns)
        else:
            mode, named, chunk = "2", "", tuple(ns)
        return ScriptCall(
            "list_checkpoints",
            (self.keys.thread(tag),),
            (
                self.keys.prefix,
                tag,
                mode,
                named,
                only_id,
                before,
                page,
                LIST_SCAN_BUDGET,
                *filter_args,
                *chunk,
            ),
        )

    def list_checkpoints(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Stream:
        if limit is not None and limit <= 0:
            return
        if filter is not None and not isinstance(filter, dict):
            raise TypeError(f"filter must be a dict of metadata keys to values, not {filter!r}")
        filter_args: list[Arg] = [len(filter or {})]
        index: tuple[str, str] | None = None  # (metadata key, index key) to start from
        by_value: list[str] = []  # threads-by-value indexes of the filter's values
        for key, value in sorted((filter or {}).items(), key=lambda kv: kv[0] in _UNSELECTIVE):
            if not isinstance(key, str):
                raise TypeError(f"filter keys must be strings (metadata keys are), not {key!r}")
            canonical = self.canonical(value)
            filter_args += [f"m:{key}", canonical]
            if index is None and key in self.indexed and _indexable(canonical):
                index = (key, self.keys.metadata_index(metadata_index_suffix(key, canonical)))
            if thread_indexed(key, canonical):
                by_value.append(self.keys.threads_with(metadata_index_suffix(key, canonical)))
            if self.cluster_lists and key == "run_id" and isinstance(value, str):
                by_value.insert(0, self.keys.threads_with(lists.run_suffix(value)))  # (a few)
        before_id = (get_checkpoint_id(before) or "") if before else ""
        if config is None and index is not None:
            yield from self._list_indexed(*index, filter_args, before_id, limit)
            return
        if config is None and by_value and (self.global_index or self.cluster_lists):
            yield from self._list_thread_candidates(by_value, filter_args, before_id, limit)
            return
        if config is None:
            yield from self._list_all_threads(filter_args, before_id, limit)
            return
        thread_id = thread_id_of(config)
        ns = config["configurable"].get("checkpoint_ns")
        only_id = get_checkpoint_id(config) or ""

        def call(before: Arg, page: int) -> ScriptCall:
            return self._list_call(thread_id, ns, only_id, before, page, filter_args)

        first = yield call(before_id, _page_size(limit))
        if first and first[0] == b"NAMESPACES":  # too many to merge in one call
            yield from self._merge_streams(
                _namespace_streams(thread_id, first[1:]), filter_args, before_id, limit
            )
            return
        yield from self._pages(
            call,
            lambda reply: (self.decode_record(thread_id, record) for record in reply[1:]),
            before_id,
            limit,
            first,
        )

    def _list_indexed(
        self, key: str, index: str, filter_args: Sequence[Arg], before: Arg, limit: int | None
    ) -> Stream:
        """list(None) for a filter on an indexed key: newest first straight from the index,
        so the cost follows the matches, not the size of the store. An index that is not
        known to be complete (the key was added to a store that had checkpoints, and no
        reindex has finished) is not used: the threads are scanned instead."""
        yield from self.register_metadata_index()

        def call(before: Arg, page: int) -> ScriptCall:
            return ScriptCall(
                "list_indexed",
                (index,),
                (self.keys.prefix, before, page, LIST_SCAN_BUDGET, key, *filter_args),
            )

        first = yield call(before, _page_size(limit))
        if first == b"BUILDING":
            yield from self._list_all_threads(filter_args, str(before), limit)
            return
        yield from self._pages(
            call,
            lambda reply: (
                self.decode_record(self.keys.thread_from_tag(tag.decode()), record)
                for tag, record in zip(reply[1::2], reply[2::2], strict=True)
            ),
            before,
            limit,
            first,
        )

    def _list_thread_candidates(
        self, indexes: Sequence[str], filter_args: Sequence[Arg], before: str, limit: int | None
    ) -> Stream:
        """list(None) for a filter with values in threads-by-value indexes: only the threads
        listed under every one of them are visited, newest first by their score, until the
        checkpoints at hand are newer than any thread left could hold (each thread is listed
        with the whole filter, so one that no longer matches costs a call, never a wrong
        answer). Indexes not known to be complete (a store written before them, no reindex
        since): every thread."""
        yield from self.register_metadata_index()
        # a cluster's lists live in different slots: one of them (the filter's first, the
        # run's if it has one), and the registry read on its own
        if self.cluster_lists:
            suffix = indexes[0][len(self.keys.threads_with("")) :]
            # (a run's list is visited whole: its threads are few, and K.bounds keeps the
            # newest scores of a thread's last runs only; lua/include/lists.lua)
            probe = None if suffix.startswith("/") else suffix
            candidates = _Candidates(tuple(indexes[:1]), probe=probe)
        else:
            candidates = _Candidates(tuple(indexes))
        if not (yield from self._read_candidates(candidates)):
            yield from self._list_all_threads(filter_args, before, limit)
            return
        if limit is None:
            yield from self._list_by_thread(
                self._candidate_threads(candidates), filter_args, before
            )
            return
        yield from self._merge_streams([], filter_args, before, limit, candidates)

    def _read_candidates(self, candidates: _Candidates) -> Op[bool]:
        """The next chunk of candidate threads into ``candidates.queue``; False when the
        indexes are still being built."""
        if self.cluster_lists and not candidates.driver and not (yield from self._lists_ready()):
            reply: Any = b"BUILDING"
        else:
            reply = yield ScriptCall(
                "list_thread_candidates",
                candidates.indexes,
                (
                    self.keys.prefix,
                    candidates.max_score,
                    CANDIDATE_CHUNK,
                    candidates.driver,
                    "cluster" if self.cluster_lists else "",
                ),
            )
        if reply == b"BUILDING":  # (only ever the first reply: an index once ready stays so)
            candidates.done = True
            return False
        candidates.driver = int(reply[0])
        last = reply[1]
        candidates.done = last is None
        if last is not None:  # the next chunk starts below this score
            candidates.max_score = b"(" + last
        for member, score in zip(reply[2::2], reply[3::2], strict=True):
            tag = lists.tag_of_member(member)  # (a cluster's members: "{T}<incarnation>")
            # once per thread (one deleted and written again meanwhile); on a cluster once per
            # incarnation: the probe tells the live one (lists.probe)
            seen = member if self.cluster_lists else tag
            if seen not in candidates.seen:
                candidates.seen.add(seen)
                thread_id = self.keys.thread_from_tag(tag.decode())
                candidates.queue.append((thread_id, float(score), member))
        return True

    def _lists_ready(self) -> Op[bool]:
        """Whether a cluster's threads-by-value lists hold every thread (see
        register_metadata_index); once they are, they stay so, and the saver asks again only
        READY_KNOWN_FOR seconds later."""
        known = self.lists_known_ready
        if known and time.monotonic() - known[0] < READY_KNOWN_FOR:
            return True
        state = yield ScriptCall(
            "register_metadata_index", (self.keys.metadata_keys(),), ("state", THREADS_BY_VALUE)
        )
        self.lists_known_ready[:] = [time.monotonic()] if state[0] == b"ready" else []
        return bool(state[0] == b"ready")

    def register_metadata_index(self) -> Op[None]:
        """Enter the saver's indexed keys, and the threads-by-value indexes
        (THREADS_BY_VALUE), in the registry P:mk, once per saver: "ready" on a store without
        threads (every checkpoint will be indexed), else "building" until
        :meth:`reindex_metadata` has indexed the checkpoints written before."""
        if not (self.global_index or self.cluster_lists) or self.registered:
            return
        registry = self.keys.metadata_keys()
        indexes = (*self.indexed, THREADS_BY_VALUE)  # (a cluster: no metadata indexes)
        missing = yield ScriptCall("register_metadata_index", (registry,), ("?", *indexes))
        if missing:
            # checkpoints, not thread roots: pending writes (which LangGraph may store before
            # the first checkpoint's put) need no index
            stored = yield ScanKeys(self.keys.index_pattern())
            state = "building" if stored else "ready"
            yield ScriptCall("register_metadata_index", (registry,), (state, *missing))
        self.registered.append(True)

    def reindex_metadata(self) -> Op[int]:
        """Add every stored checkpoint to the global metadata indexes of every registered key
        (the saver's own and other savers'), thread by thread in bounded steps, then mark the
        keys that were "building" as "ready"; entries a record lists that its index lost (an
        eviction) are written again. Returns the number of index entries added."""
        if not (self.global_index or self.cluster_lists):
            return 0
        yield from self.register_metadata_index()
        registry = self.keys.metadata_keys()
        # the keys this reindex completes: whatever is building when it starts, claimed
        # under a token of its own (a key registered later, or again after the registry was
        # lost, may have missed a thread already visited: it stays building)
        token = secrets.token_hex(8)
        pending = yield ScriptCall("register_metadata_index", (registry,), ("claim", token))
        added = 0
        thread_ids = yield from self._scan_thread_ids()
        for thread_id in thread_ids:
            tag = self.keys.tag(thread_id)
            cursor: Sequence[Arg] = ("", "")
            ahead = lists.Ahead() if self.cluster_lists else None
            while True:
                reply = yield ScriptCall(
                    "reindex_thread",
                    (self.keys.thread(tag),),
                    (self.keys.prefix, tag, *cursor, REINDEX_STEP, *lists.hint_args(ahead)),
                )
                if ahead is not None and lists.is_index_reply(reply):
                    yield from lists.answer(self, tag, reply, ahead)
                    continue  # (the same stretch again, with the entries written)
                if ahead is not None:
                    ahead.bounds.clear()  # (recorded by the thread: the hint stays short)
                added += int(reply[0])
                if len(reply) == 1:
                    break
                cursor = (reply[1], reply[2])
        if self.cluster_lists:
            # entries a failover lost (the replica of a list's node had not received them)
            # while the threads' own nodes kept their bounds: no put writes them again
            added += yield from lists.enter_missing(self, [self.keys.tag(t) for t in thread_ids])
        if pending:
            yield ScriptCall("register_metadata_index", (registry,), ("built", token, *pending))
        return added

    def _pages(
        self,
        call: Callable[[Arg, int], ScriptCall],
        tuples: Callable[[Sequence[Any]], Iterable[CheckpointTuple]],
        before: Arg,
        limit: int | None,
        first: Sequence[Any] | None = None,
    ) -> Stream:
        """One script call per page (``{cursor, ...}`` replies) until ``limit`` tuples are
        out or the cursor runs out; ``first`` is the reply to a first page already fetched."""
        remaining = limit
        while True:
            page = _page_size(remaining)
            reply = first if first is not None else (yield call(before, page))
            first = None
            for tup in tuples(reply):
                yield tup
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if reply[0] is None:
                return
            before = reply[0]

    def _list_all_threads(
        self, filter_args: Sequence[Arg], before_id: str, limit: int | None
    ) -> Stream:
        """list(None) over every thread, found by SCAN a step at a time: without a limit
        thread by thread (_list_by_thread), with one the newest ``limit`` (_list_newest).
        The client's memory follows neither the number of threads nor their histories."""
        if limit is None:
            yield from self._list_by_thread(self._scanned_threads(), filter_args, before_id)
        else:
            yield from self._list_newest(self._scanned_threads, filter_args, before_id, limit)

    def _scanned_threads(self) -> _Threads:
        """Every thread, a SCAN step's worth at a time, in the order SCAN yields them (a
        thread once within a step; SCAN may yield one twice, rarely, see ScanPage)."""
        cursor: str | None = ""

        def next_threads() -> Op[list[str] | None]:
            nonlocal cursor
            while cursor is not None:
                cursor, keys = yield ScanPage(self.keys.thread_pattern(), cursor, SCAN_COUNT)
                threads = list(dict.fromkeys(self.keys.thread_id_of(k.decode()) for k in keys))
                if threads:
                    return threads
            return None

        return next_threads

    def _candidate_threads(self, candidates: _Candidates) -> _Threads:
        """The candidate threads, a chunk at a time, newest first by their scores; on a
        cluster, of a value's list, those whose incarnation is live and that have a
        checkpoint with the value (lists.probe). Only a chunk's threads are remembered: a
        thread deleted and written again while the listing runs may come twice."""

        def next_threads() -> Op[list[str] | None]:
            while True:
                if not candidates.queue:
                    if candidates.done:
                        return None
                    candidates.seen.clear()
                    yield from self._read_candidates(candidates)
                    continue
                asked = list(candidates.queue)
                candidates.queue.clear()
                if candidates.probe is None:
                    threads = [thread_id for thread_id, _, _ in asked]
                else:
                    threads = []
                    for start in range(0, len(asked), BATCH_SIZE):
                        part = asked[start : start + BATCH_SIZE]
                        live = yield from lists.probe(self, candidates.probe, part)
                        threads += [thread_id for thread_id, _ in live]
                # (on a cluster, a thread of a run's list under two incarnations: once)
                threads = list(dict.fromkeys(threads))
                if threads:
                    return threads

        return next_threads

    def _send_all(self, calls: Sequence[ScriptCall]) -> Op[list[Any]]:
        """The calls' replies, in pipelines of BATCH_SIZE (a call alone goes alone: a
        pipeline would load the scripts first)."""
        if len(calls) == 1:
            return [(yield calls[0])]
        replies: list[Any] = []
        for start in range(0, len(calls), BATCH_SIZE):
            replies += yield Batch(calls[start : start + BATCH_SIZE])
        return replies

    def _list_by_thread(
        self, next_threads: _Threads, filter_args: Sequence[Arg], before_id: str
    ) -> Stream:
        """list(None) without a limit: thread by thread, as ``next_threads`` gives them, each
        thread's checkpoints newest first (its namespaces merged, as list() of one thread
        does). The first pages of THREAD_GROUP threads are read in one round trip (at most
        FIRST_PAGE checkpoints each), a thread's further pages one at a time: the client
        holds those and the chunk of thread ids, nothing per thread of the store."""
        while True:
            threads = yield from next_threads()
            if threads is None:
                return
            for start in range(0, len(threads), THREAD_GROUP):
                group = threads[start : start + THREAD_GROUP]
                calls = [
                    self._list_call(t, None, "", before_id, FIRST_PAGE, filter_args) for t in group
                ]
                replies = yield from self._send_all(calls)
                for n, thread_id in enumerate(group):
                    first, replies[n] = replies[n], None  # (out: not held any more)
                    yield from self._thread_pages(thread_id, first, filter_args, before_id)

    def _thread_pages(
        self, thread_id: str, first: Sequence[Any], filter_args: Sequence[Arg], before_id: str
    ) -> Stream:
        """A thread's checkpoints (every namespace), newest first, from its first reply on."""
        if first and first[0] == b"NAMESPACES":  # too many to merge in one call
            streams = _namespace_streams(thread_id, first[1:])
            yield from self._merge_streams(streams, filter_args, before_id, None)
            return

        def call(before: Arg, page: int) -> ScriptCall:
            return self._list_call(thread_id, None, "", before, page, filter_args)

        yield from self._pages(
            call,
            lambda reply: (self.decode_record(thread_id, record) for record in reply[1:]),
            before_id,
            None,
            first,
        )

    def _list_newest(
        self,
        threads: Callable[[], _Threads],
        filter_args: Sequence[Arg],
        before_id: str,
        limit: int,
    ) -> Stream:
        """list(None, limit=L) over threads that come in no order of time (SCAN): the L
        newest checkpoints, newest first, in memory of O(L). The ids are chosen first
        (_select_newest), then their records read a page at a time. A checkpoint gone in
        between (deleted, expired, its blobs gone) is made up for by choosing again among
        those after the last one chosen."""
        cut: _Ranked | None = None
        remaining = limit
        while remaining > 0:
            chosen = yield from self._select_newest(
                threads(), filter_args, before_id, remaining, cut
            )
            chosen.sort(reverse=True)  # (the newest first)
            asked, missing = remaining, 0
            for start in range(0, len(chosen), LIST_PAGE):
                part = chosen[start : start + LIST_PAGE]
                calls = [
                    self._list_call(
                        e.thread, decode_part(e.ns.decode()), e.id.decode(), "", 1, filter_args
                    )
                    for e in part
                ]
                replies = yield from self._send_all(calls)
                for n, entry in enumerate(part):
                    reply, replies[n] = replies[n], None
                    if len(reply) > 1:
                        yield self.decode_record(entry.thread, reply[1])
                        remaining -= 1
                    else:
                        missing += 1
            if not missing or len(chosen) < asked:
                return
            cut = chosen[-1]

    def _select_newest(
        self,
        next_threads: _Threads,
        filter_args: Sequence[Arg],
        before_id: str,
        limit: int,
        cut: _Ranked | None,
    ) -> Op[list[_Ranked]]:
        """The newest ``limit`` checkpoints of the threads (only those after ``cut``, when
        given), as ids: each thread's ids, newest first (ids only), go through a heap of the
        newest ``limit`` seen so far, and a thread's next page is asked only while its ids
        may still enter it. Memory: the heap, and the ids of one round trip."""
        best: list[_Ranked] = []  # a heap: the last of the newest on top
        held: set[tuple[bytes, str, bytes]] = set()  # (a thread SCAN yields twice: once)
        before: Arg = before_id
        if cut is not None:
            bound = cut.id + b"\0"  # (ids up to the cut's: of equal ids, the later threads)
            if not before_id or bound < before_id.encode():
                before = bound

        def offer(entry: _Ranked) -> None:
            if (cut is not None and not entry < cut) or entry.key() in held:
                return
            if len(best) < limit:
                heapq.heappush(best, entry)
            elif best[0] < entry:
                held.discard(heapq.heapreplace(best, entry).key())
            else:
                return
            held.add(entry.key())

        size = _page_size(limit)
        group = max(1, SELECT_IDS // size)
        while True:
            threads = yield from next_threads()
            if threads is None:
                return best
            for start in range(0, len(threads), group):
                streams: list[_ListStream] = [(t, None) for t in threads[start : start + group]]
                cursors: list[Arg] = [before] * len(streams)
                waiting = list(range(len(streams)))
                first = True
                while waiting:
                    page = min(size, FIRST_IDS) if first else size
                    first = False
                    calls = [
                        self._list_call(*streams[i], "", cursors[i], -page, filter_args)
                        for i in waiting
                    ]
                    replies = yield from self._send_all(calls)
                    again: list[int] = []
                    for i, reply in zip(waiting, replies, strict=True):
                        if reply and reply[0] == b"NAMESPACES":
                            for chunk in _namespace_streams(streams[i][0], reply[1:]):
                                again.append(len(streams))
                                streams.append(chunk)
                                cursors.append(cursors[i])
                            continue
                        for ns, checkpoint_id in reply[1:]:
                            offer(_Ranked(checkpoint_id, streams[i][0], ns))
                        if reply[0] is not None and (len(best) < limit or reply[0] > best[0].id):
                            cursors[i] = reply[0]
                            again.append(i)
                    waiting = again

    def _merge_streams(
        self,
        streams: list[_ListStream],
        filter_args: Sequence[Arg],
        before_id: str,
        limit: int | None,
        candidates: _Candidates | None = None,
    ) -> Stream:
        """Pages of several streams (a thread's every namespace, or a chunk of the
        namespaces of a thread that has too many for one call) merged newest first. A
        stream whose reply lists its namespaces instead is replaced by one stream per
        chunk of them. ``candidates``: threads to add as streams while the newest checkpoint
        at hand is not newer than the next one's score (see _list_thread_candidates).

        With more than LIST_WINDOW streams, a stream's first fetch reads only the id of its
        next checkpoint (a head, ``[ns, id]``), its page is read when that head comes out on
        top, and a stream whose page is not needed soon goes back to its head: at most
        LIST_WINDOW pages are held at a time."""
        page = _page_size(limit)
        # heap entries: (_Newest(id), whether a head, stream index, position in that stream's
        # page, version): of equal ids whole records come out first, so that reading a
        # head's page never puts back at the top a stream that has just been read; an entry
        # whose version is not its stream's is stale (the stream went back to its head)
        pages: list[list[Any]] = [[] for _ in streams]
        cursors: list[str | None] = [before_id] * len(streams)
        heap: list[tuple[_Newest, bool, int, int, int]] = []
        versions: dict[int, int] = {}
        at: dict[int, int] = {}  # the streams holding a page, and their position in it

        def enter(i: int, pos: int) -> None:
            """Stream i into the heap at position pos of its page."""
            versions[i] = versions.get(i, 0) + 1
            head = len(pages[i][pos]) == 2
            heapq.heappush(heap, (_Newest(pages[i][pos][1]), head, i, pos, versions[i]))
            if not head:
                at[i] = pos

        def take(i: int, reply: Sequence[Any]) -> list[int]:
            """Take a reply; returns the new streams it expanded into, if any."""
            if reply and reply[0] == b"NAMESPACES":
                thread_id = streams[i][0]
                expanded = _namespace_streams(thread_id, reply[1:])
                streams[i] = expanded[0]
                added = list(range(len(streams), len(streams) + len(expanded) - 1))
                streams.extend(expanded[1:])
                pages.extend([] for _ in added)
                cursors.extend(cursors[i] for _ in added)
                return [i, *added]
            pages[i] = list(reply[1:])
            cursors[i] = reply[0].decode() if reply[0] is not None else None
            at.pop(i, None)  # (its old page's place; enter() gives the new one)
            if pages[i]:
                enter(i, 0)
            return []

        def fetch(indexes: Sequence[int], heads: bool = False) -> Op[None]:
            """The next page of each stream, fetched until it holds a checkpoint or the
            stream is done: a page may come back empty with a cursor (a long stretch that
            the filter rejects), and the merge can only go on once every stream's next
            checkpoint is known."""
            waiting = list(indexes)
            while waiting:
                again: list[int] = []
                for start in range(0, len(waiting), BATCH_SIZE):
                    chunk = waiting[start : start + BATCH_SIZE]
                    size = -1 if heads else page
                    calls = [
                        self._list_call(
                            streams[i][0], streams[i][1], "", cursors[i] or "", size, filter_args
                        )
                        for i in chunk
                    ]
                    # one call goes alone: a pipeline would load the scripts first
                    replies = [(yield calls[0])] if len(calls) == 1 else (yield Batch(calls))
                    for i, reply in zip(chunk, replies, strict=True):
                        again += take(i, reply)
                # a stream that expanded into chunks is in `again` and may be empty with a
                # cursor too: fetched twice, its checkpoints would come out twice
                waiting = list(
                    dict.fromkeys(
                        [*again, *(i for i in waiting if not pages[i] and cursors[i] is not None)]
                    )
                )

        def visit_candidates(more: _Candidates) -> Op[None]:
            """Add candidate threads, a group at a time, until the newest checkpoint at hand
            is newer than any checkpoint of the threads left."""
            group = BATCH_SIZE if limit is None else max(CANDIDATE_GROUP, min(limit, BATCH_SIZE))
            while True:
                if not more.queue and not more.done:
                    yield from self._read_candidates(more)
                unique: dict[str, tuple[str, float, bytes]] = {}
                if more.probe is not None and more.done and not more.probed:
                    for entry in more.queue:  # (in score order)
                        if entry[0] not in more.live:  # (a thread probed is visited already)
                            unique.setdefault(entry[0], entry)
                if unique and len(unique) <= group:
                    # the threads left fit in one group: visited at once, with no need of
                    # their newest scores (a round trip), each once whatever incarnations
                    # its members name
                    more.probe = None
                    more.queue = deque(unique.values())
                if more.probe is not None:
                    yield from probe_candidates(more)
                    best = -more.probed[0][0] if more.probed else None
                else:
                    best = more.queue[0][1] if more.queue else None
                if best is None or (heap and _newer_than(heap[0][0].id, best)):
                    return
                first = len(streams)
                while len(streams) - first < group:
                    if more.probe is not None and more.probed:
                        thread_id = heapq.heappop(more.probed)[1]
                    elif more.probe is None and more.queue:
                        thread_id = more.queue.popleft()[0]
                    else:
                        break
                    streams.append((thread_id, None))
                    pages.append([])
                    cursors.append(before_id)
                yield from fetch(range(first, len(streams)), heads=len(streams) > LIST_WINDOW)

        def probe_candidates(more: _Candidates) -> Op[None]:
            """On a cluster, where list scores are loose by the write-ahead margin: ask the
            threads at the head of the queue their newest score with the value, while one
            there may be above every thread asked (see lists.probe)."""
            assert more.probe is not None
            while True:
                if not more.queue and not more.done:
                    yield from self._read_candidates(more)
                if not more.queue or (more.probed and more.queue[0][1] <= -more.probed[0][0]):
                    return
                asked = [more.queue.popleft() for _ in range(min(PROBE_GROUP, len(more.queue)))]
                for thread_id, newest in (yield from lists.probe(self, more.probe, asked)):
                    # once per thread: one deleted and written again while the list is read
                    # may be met live under both incarnations
                    if thread_id not in more.live:
                        more.live.add(thread_id)
                        heapq.heappush(more.probed, (-newest, thread_id))

        def make_room(keep: Sequence[int]) -> None:
            """Back to its head: the stream holding a page whose next checkpoint is the
            oldest, while more than LIST_WINDOW hold one (but those in ``keep``)."""
            while len(at) > LIST_WINDOW:
                others = [s for s in at if s not in keep]
                if not others:
                    return
                j = min(others, key=lambda s: pages[s][at[s]][1])
                pos = at.pop(j)
                ns, checkpoint_id = pages[j][pos][:2]
                pages[j] = [None] * pos + [[ns, checkpoint_id]]
                enter(j, pos)

        yield from fetch(range(len(streams)), heads=len(streams) > LIST_WINDOW)
        make_room(())  # (a thread may have expanded into more streams than that)
        emitted = 0
        while True:
            if candidates is not None:
                yield from visit_candidates(candidates)
            if not heap:
                return
            _, head, i, pos, version = heapq.heappop(heap)
            if version != versions[i]:
                continue
            if head:
                # read the page from it on, with those of the heads right after it
                group = [i]
                while heap and len(group) < min(HEAD_GROUP, LIST_WINDOW):
                    _, next_head, j, _, next_version = heap[0]
                    if next_version == versions[j] and not next_head:
                        break
                    heapq.heappop(heap)
                    if next_version == versions[j]:
                        group.append(j)
                for j in group:
                    cursors[j] = pages[j][-1][1].decode() + "\0"
                    pages[j] = []
                yield from fetch(group)
                make_room(group)
                continue
            record, pages[i][pos] = pages[i][pos], None  # (out: not held any more)
            yield self.decode_record(streams[i][0], record)
            emitted += 1
            if limit is not None and emitted >= limit:
                return
            if pos + 1 < len(pages[i]):
                enter(i, pos + 1)
            elif cursors[i] is not None:
                pages[i] = []
                yield from fetch([i])
                make_room((i,))
            else:
                at.pop(i, None)  # (done)

    def _threads_of_runs(self, run_ids: Sequence[str]) -> Op[list[str]]:
        """On a cluster: the threads in the lists of the runs (a superset of those with a
        checkpoint of one of them; see .lists)."""
        found: set[str] = set()
        for run_id in run_ids:
            candidates = _Candidates((self.keys.threads_with(lists.run_suffix(run_id)),))
            candidates.driver = 1  # (one list; the registry was read)
            while not candidates.done:
                yield from self._read_candidates(candidates)
                found.update(thread_id for thread_id, _, _ in candidates.queue)
                candidates.queue.clear()
        return sorted(found)

    def _threads_in_run_index(self, run_ids: Sequence[str]) -> Op[list[str] | None]:
        """On a standalone server: the threads in run_id's metadata index under the runs, and
        those whose runs it does not name by their text (P:rx: a run_id that is not a
        string, or a long one), a superset of those with a checkpoint of one of the runs;
        None when that index is not complete (see lua/run_threads.lua)."""
        found: set[str] = set()
        # (index, where to read it on): the runs' first pages go in pipelines, not one round
        # trip each (20,000 runs took 6 s)
        pending: list[tuple[str, Arg]] = [
            (self.keys.metadata_index(metadata_index_suffix("run_id", self.canonical(r))), "")
            for r in run_ids
        ]
        while pending:
            reading, pending = pending[: bulk.BATCH_SIZE], pending[bulk.BATCH_SIZE :]
            replies = yield Batch(
                [
                    ScriptCall(
                        "run_threads",
                        (index, self.keys.unindexed_runs()),
                        (self.keys.prefix, after, CANDIDATE_CHUNK),
                    )
                    for index, after in reading
                ]
            )
            for (index, _), reply in zip(reading, replies, strict=True):
                if reply == b"BUILDING":
                    return None
                found.update(self.keys.thread_from_tag(tag.decode()) for tag in reply[1:])
                if reply[0] is not None:
                    pending.append((index, reply[0]))
        return sorted(found)

    def _scan_thread_ids(self) -> Op[list[str]]:
        keys = yield ScanKeys(self.keys.thread_pattern())
        return sorted({self.keys.thread_id_of(k.decode()) for k in keys})

    # Whole-thread operations work in bounded steps: see bulk.py.
    def delete_thread(self, thread_id: str) -> Op[None]:
        yield from bulk.delete_thread(self, thread_id)
        self.bases.drop_thread(self.keys.tag(thread_id))  # gone with the thread

    def delete_for_runs(self, run_ids: Sequence[str]) -> Op[None]:
        yield from bulk.delete_for_runs(self, run_ids)

    def prune(self, thread_ids: Sequence[str], strategy: str = "keep_latest") -> Op[None]:
        script = PRUNE_STRATEGIES.get(strategy)
        if script is None:
            raise ValueError(
                f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete_all'"
            )
        yield from bulk.prune(self, thread_ids, script)
        if script == "delete_thread":
            for thread_id in thread_ids:
                self.bases.drop_thread(self.keys.tag(thread_id))  # gone with the threads

    def set_thread_ttl(self, thread_id: str, seconds: int | None) -> Op[None]:
        """Give a thread its own expiry (``0`` pins it), or, with ``None``, return it to the
        saver's default."""
        yield from bulk.set_thread_ttl(self, thread_id, seconds)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> Op[None]:
        yield from bulk.copy_thread(self, source_thread_id, target_thread_id)


# one list stream: a thread, and its namespaces (encoded) when it has too many for one call
_ListStream = tuple[str, Sequence[str] | None]
# where a listing over many threads takes them from: the next chunk of thread ids, or None
_Threads = Callable[[], Op[list[str] | None]]


def _namespace_streams(thread_id: str, namespaces: Sequence[bytes]) -> list[_ListStream]:
    """A thread with more namespaces than one call merges, as one stream per chunk of them
    (in byte order, so that every call sees the same chunks)."""
    names = sorted(n.decode() for n in namespaces)
    return [
        (thread_id, names[i : i + NAMESPACE_CHUNK]) for i in range(0, len(names), NAMESPACE_CHUNK)
    ] or [(thread_id, ())]


def _inlinable(channel: str, value: Any) -> bool:
    """Whether a channel value is stored inside its checkpoint's record (see
    TRIGGER_CHANNEL_PREFIX)."""
    return value is None and channel.startswith(TRIGGER_CHANNEL_PREFIX)


def index_suffix(key: str, canonical: str) -> str:
    """The suffix of the global indexes a metadata value may get (put_checkpoint.lua encodes
    none itself), "" for a value that gets none: null, or longer than MAX_INDEXED_VALUE.
    ``key``: the text of the metadata key, as the record's field names it."""
    if not _indexable(canonical):
        return ""  # (before the cache: it holds no long value)
    return _cached_index_suffix(key, canonical)


@functools.lru_cache(maxsize=4096)
def _cached_index_suffix(key: str, canonical: str) -> str:
    # most values repeat from one put to the next (source, user ids, a run's id); the key is
    # a plain str here (a str Enum equal to it would share its entry: see index_suffix)
    return metadata_index_suffix(key, canonical)


def _page_size(limit: int | None) -> int:
    """Checkpoints asked of one list call: a page, or what the limit leaves."""
    return LIST_PAGE if limit is None else min(limit, LIST_PAGE)


def _indexable(canonical: str) -> bool:
    return canonical != "null" and len(canonical) <= MAX_INDEXED_VALUE


def thread_indexed(key: str, canonical: str) -> bool:
    """Whether a metadata value puts its thread in a threads-by-value index: a JSON string of
    at most 128 characters, for a key not in THREAD_INDEX_SKIPS. (Numbers are left out: most
    are counters, which would take an entry per checkpoint.)"""
    return (
        key not in THREAD_INDEX_SKIPS
        and canonical.startswith('"')
        and len(canonical.encode()) <= MAX_THREAD_INDEXED
    )


class _Newest:
    """Heap key that pops the lexically greatest checkpoint id (the newest) first."""

    __slots__ = ("id",)

    def __init__(self, checkpoint_id: bytes) -> None:
        self.id = checkpoint_id

    def __lt__(self, other: _Newest) -> bool:
        return self.id > other.id

    def __eq__(self, other: object) -> bool:
        # (so that a heap entry's next fields order equal ids)
        return isinstance(other, _Newest) and self.id == other.id

    __hash__ = None  # type: ignore[assignment]


class _Ranked:
    """A checkpoint's place in the order of list(None, limit=...): the newest id first, then
    by thread id, then by namespace (encoded). ``a < b``: a comes after b, so that a heap's
    top is the last."""

    __slots__ = ("id", "ns", "thread")

    def __init__(self, checkpoint_id: bytes, thread: str, ns: bytes) -> None:
        self.id, self.thread, self.ns = checkpoint_id, thread, ns

    def key(self) -> tuple[bytes, str, bytes]:
        return (self.id, self.thread, self.ns)

    def __lt__(self, other: _Ranked) -> bool:
        if self.id != other.id:
            return self.id < other.id
        return (self.thread, self.ns) > (other.thread, other.ns)


_UUID_HEAD = re.compile(rb"([0-9a-f]+)-([0-9a-f]+)-([0-9a-f])")


def id_score(checkpoint_id: bytes) -> float:
    """A checkpoint id's score in the threads-by-value indexes: for an id that starts like a
    lowercase UUID, its first 13 hex digits as a number (exact in a float), so that for two
    such ids lexical order implies the order of their scores; for any other id, infinity.
    The same rule: id_score() in lua/include/keyschema.lua."""
    head = _UUID_HEAD.match(checkpoint_id)
    if head and len(head[1]) == 8 and len(head[2]) == 4:
        return float(int(head[1] + head[2] + head[3], 16))
    return float("inf")


def _newer_than(checkpoint_id: bytes, score: float) -> bool:
    """Whether the checkpoint is newer than every checkpoint whose score is at most
    ``score``: an id with a score above it (ids of other forms score infinity)."""
    own = id_score(checkpoint_id)
    return own != float("inf") and own > score


@dataclass
class _Candidates:
    """Where a list over threads-by-value indexes stands: the next scores to read and the
    threads read but not visited yet, newest first, with their scores and list members."""

    indexes: tuple[str, ...]
    max_score: bytes = b"inf"  # where the next chunk starts ("(<score>": below it)
    driver: int = 0  # the index whose order the chunks follow (0: not chosen yet)
    done: bool = False
    queue: deque[tuple[str, float, bytes]] = dataclasses.field(default_factory=deque)
    # on a cluster: the list (its suffix) whose threads are asked their newest score before
    # they are visited, and the threads asked, by that score (a heap of (-score, thread id))
    probe: str | None = None
    probed: list[tuple[float, str]] = dataclasses.field(default_factory=list)
    live: set[str] = dataclasses.field(default_factory=set)
    seen: set[bytes] = dataclasses.field(default_factory=set)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
