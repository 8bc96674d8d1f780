"""What one saver's operations share: its settings, its codec, its limits, and the caches it
keeps between calls. The operation modules take it as their first argument (``core``)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol

from ..compression import DEFAULT_LEVEL, BaseCache
from ..keys import KeySchema
from ..settings import TTLSettings
from .codec import Codec
from .limits import Limits

_State = TypeVar("_State", bound="CoreState")

# threads whose incarnation and bounds a saver remembers (most recently written)
LIST_CACHE_SIZE = 10_000


def _keep_recent(threads: OrderedDict[str, Any], tag: str, size: int) -> None:
    """Move ``tag`` to the end of a per-thread cache, and let the oldest go past ``size``.
    A sync saver's threads share the cache without a lock (the core does no threading):
    each OrderedDict step is atomic, and a tag another thread dropped meanwhile (a delete),
    or a cache it emptied, is no error."""
    with contextlib.suppress(KeyError):
        threads.move_to_end(tag)
        while len(threads) > size:
            threads.popitem(last=False)


@dataclass
class ListCache:
    """On a cluster: what this saver wrote of each thread's threads-by-value entries (see
    cluster_lists): its incarnation and, per list, the score written (a hint: the thread's
    script has the last word). Shared by the threads of a sync saver (see _keep_recent)."""

    threads: OrderedDict[str, tuple[str, dict[str, float]]] = field(default_factory=OrderedDict)

    def get(self, tag: str) -> tuple[str, dict[str, float]] | None:
        return self.threads.get(tag)

    def put(self, tag: str, inc: str, bounds: dict[str, float]) -> None:
        known = self.threads.get(tag)
        merged = dict(known[1]) if known and known[0] == inc else {}
        for suffix, bound in bounds.items():
            merged[suffix] = max(bound, merged.get(suffix, bound))
        self.threads[tag] = (inc, merged)
        _keep_recent(self.threads, tag, LIST_CACHE_SIZE)

    def drop(self, tag: str) -> None:
        self.threads.pop(tag, None)


# threads whose noted deadline a saver remembers (most recently noted)
NOTED_CACHE_SIZE = 10_000


@dataclass
class NotedDeadlines:
    """The deadline this saver last noted per thread tag (a hint: the registry's ZADD GT has
    the last word). Shared by the threads of a sync saver (see _keep_recent)."""

    threads: OrderedDict[str, int] = field(default_factory=OrderedDict)

    def last(self, tag: str) -> int:
        """The deadline this saver noted last for the thread, 0 for none: put_checkpoint.lua
        replies a new one only when it moved by 1/16 of the ttl since (down too: another saver
        may have shortened its ttl, and forgotten it in the registry), both on the server's
        clock."""
        noted = self.threads.get(tag)
        if noted is None:
            return 0
        _keep_recent(self.threads, tag, NOTED_CACHE_SIZE)  # (a busy thread stays known)
        return noted

    def noted(self, tag: str, deadline: int) -> None:
        self.threads[tag] = deadline
        _keep_recent(self.threads, tag, NOTED_CACHE_SIZE)

    def drop(self, tag: str) -> None:
        self.threads.pop(tag, None)


@dataclass(frozen=True, slots=True)
class CoreState:
    """Key building, settings, codec and limits of one saver."""

    keys: KeySchema
    serde: SerializerProtocol  # the saver's serializer; values are stored with codec.storage
    ttl: TTLSettings | None = None
    # metadata keys with a global index (empty on a cluster, where it cannot be kept atomic)
    indexed: tuple[str, ...] = ()
    # False on a cluster: no global metadata index at all
    global_index: bool = True
    # True on a cluster: threads-by-value lists written ahead by the client (see
    # cluster_lists)
    cluster_lists: bool = False
    # what this saver wrote of the threads' list entries (mutable on purpose: a cache)
    list_cache: ListCache = dataclasses.field(default_factory=ListCache)
    # the deadline this saver last noted per thread in the registry of live threads (mutable
    # on purpose: a cache; see .deadlines)
    noted_deadlines: NotedDeadlines = dataclasses.field(default_factory=NotedDeadlines)
    # set once the indexed keys are in the registry (mutable on purpose: a per-saver cache)
    registered: list[bool] = dataclasses.field(default_factory=list)
    # set once the prefix's stored format has been checked (see ..storeformat; mutable on
    # purpose: a per-saver cache)
    format_checked: list[bool] = dataclasses.field(default_factory=list)
    # on a cluster: when the threads-by-value lists were last known to be complete (they stay
    # so, but for a store emptied and refilled without them, as a restored backup of an older
    # version), saving a listing the round trip that asks for limits.ready_known_for seconds
    # (mutable on purpose: a per-saver cache)
    lists_known_ready: list[float] = dataclasses.field(default_factory=list)
    # zstd level of stored values, None for uncompressed (see ..compression)
    compression: int | None = DEFAULT_LEVEL
    # keep only the newest this many checkpoints per namespace (0: all), see
    # lua/include/trim.lua
    keep_last: int = 0
    # "fall_back": get_tuple of the latest checkpoint that lost a value answers the newest
    # one still complete (README, Eviction); "raise": CheckpointLostError
    on_lost_checkpoint: str = "raise"
    limits: Limits = dataclasses.field(default_factory=Limits)
    # the bases channel values are compressed against (mutable on purpose: a per-saver cache)
    bases: BaseCache = dataclasses.field(default_factory=BaseCache)
    # the bases of the values read lately, by their stored bytes (see Codec.base); sized by
    # limits.read_bases when None
    read_bases: BaseCache | None = None
    # serialization and compression, built from the fields above
    codec: Codec = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        read_bases = self.read_bases
        if read_bases is None:
            read_bases = BaseCache(self.limits.read_bases)
            object.__setattr__(self, "read_bases", read_bases)
        codec = Codec(
            self.keys,
            self.serde,
            self.compression,
            self.keep_last,
            self.bases,
            read_bases,
            self.limits.ref_min_size,
        )
        object.__setattr__(self, "codec", codec)

    def with_serde(self: _State, serde: SerializerProtocol) -> _State:
        return replace(self, serde=serde)

    @property
    def ttl_seconds(self) -> int:
        return self.ttl.seconds if self.ttl else 0

    @property
    def read_ttl_seconds(self) -> int:
        """get_tuple's refresh argument: the default ttl, or -1 for no refresh on read."""
        return self.ttl.seconds if self.ttl and self.ttl.refresh_on_read else -1
