"""The key schema: every Redis key the saver reads or writes is built here.

Encoding
--------
Thread ids, checkpoint namespaces, checkpoint ids, channel names, channel versions and run ids
can be any string. Each is *percent-encoded* before it becomes part of a key: its UTF-8 bytes
are kept when they are ASCII letters, digits or one of ``- . _ ~`` and written as ``%XX``
(upper-case hex) otherwise. So an encoded part

* never contains ``:`` (the separator), so parts cannot run into each other: thread ``k:x``
  with namespace ``y:z`` and thread ``k`` with namespace ``x:y:z`` get different keys;
* never contains a glob character (``* ? [ ] \\``), so ``SCAN MATCH`` patterns built from it
  match exactly one thread: listing thread ``a*`` never touches thread ``ab``;
* never contains ``{`` or ``}``, so the hash tag stays the one we put there;
* decodes back to the original string (the encoding is injective).

The encoding of an empty thread id would leave an empty hash tag ``{}``, which Redis Cluster
ignores; it is written as ``%`` instead (a bare ``%`` is never produced otherwise).

Layout (``P`` is the prefix, ``T`` the encoded thread id, ``N`` the encoded namespace, ``I``
the encoded checkpoint id). Every key of a thread carries the hash tag ``{T}``, so all of them
live in one Redis Cluster slot and every per-thread script stays on one node::

    P:th:{T}            SET    encoded namespaces of the thread (the thread index)
    P:idx:{T}:N         ZSET   raw checkpoint ids, all scored 0: lexical order = time order
    P:cp:{T}:N:I        STRING one checkpoint, its fields packed (parse_record; a HASH of the
                               same fields when written before that): ck, md, p (parent id),
                               bv (blob refs: "C:V,..."
                               of its values, then ",," and the refs of the bases some are
                               stored against, see .compression), r (run), m:<key> (canonical
                               JSON of each metadata value, for filters), w:<task>:<idx>
                               (its pending writes, last)
    P:w:{T}:N:I         HASH   pending writes stored before their checkpoint (or by a version
                               that kept every checkpoint's writes here), field "<task>:<idx>"
    P:wi:{T}:N          SET    raw ids of the checkpoints with such a hash (the writes index)
    P:dl:{T}:N          HASH   the deadline ledger: raw checkpoint id -> "<deadline> <setting>",
                               the unix second its record expires at ("0": never) and the
                               thread's ttl setting ("-": none) it was computed under (a
                               reader trusts it under that setting only); written wherever
                               a record's expiry is set or renewed, expiring with the
                               index; a reader
                               that finds a record missing while its entry says it should be
                               there raises CheckpointLostError (evicted, not expired); no
                               entry (0.1.x records) reads as expired (lua/include/ledger.lua)
    P:blob:{T}:N:C:V    STRING one channel value at one version: b"<type>\\0<bytes>"; a type
                               "zr:<base ref>;..." is compressed against the blob of the base
    P:runs:{T}          SET    encoded run ids that wrote checkpoints in the thread
    P:run:{T}:R         SET    "N:<raw id>" of each checkpoint of run R (the run index)
    P:ttl:{T}           STRING the thread's own expiry in seconds ("0": pinned), if it has one
    P:tv:{T}            SET    the "K:V" of every threads-by-value index (P:tm) the thread is
                               listed in, so that a delete takes it out of all of them
    P:tb:{T}            HASH   on a cluster: the thread's incarnation ("" -> a random word) and
                               the least score of its entry in each threads-by-value list
                               ("K:V" or "/R" -> score), written ahead (see .core.cluster_lists)
    P:slot:{T}          never written: declared by every script call on a cluster, so that a
                        call during a slot move is refused before it starts (TRYAGAIN)
    P:gc:{T}            SET    pending jobs "<kind>:<n>" of whole-thread operations done in
                               steps (delete, prune, delete_for_runs, set_thread_ttl, copy);
                               exists exactly while one is pending, and writers of the thread
                               wait until it is gone (lua/include/jobs.lua)
    P:gc:{T}:<n>        HASH   job n's progress; P:gc:{T}:<n>:<part> its containers (a renamed
                               thread root, the old indexes of a prune, ...)
    P:gc:{T}:s:<token>  SET    run ids a delete_for_runs of many runs staged until its last call
                               makes them one job (expires after a day)
    P:lb:{T}:N          SET    loose blobs: refs "C:V" that a replaced checkpoint record (an id
                               put again, a copy onto the same id) referenced and its
                               replacement does not; delete and prune find them here
    P:mi:K:V            ZSET   global metadata index, standalone servers only: every checkpoint
                               whose metadata key K has the canonical JSON value V, as members
                               "<raw id>\0{T}:N" scored 0 (lexical order = time order); the
                               checkpoint's ix field lists the "K:V" it is indexed under
                               (and "/K:V" for each threads-by-value index it put its thread in)
    P:tm:K:V            ZSET   threads by metadata value (a cluster's: see below): the tags of
                               the threads that have (or had) a checkpoint whose metadata key K
                               has the canonical JSON value V, for the values that
                               core.thread_indexed() takes (short strings of most keys), each
                               scored at least core.id_score() of its checkpoints with it;
                               on a cluster the members are "{T}<incarnation>", and runs have
                               lists too, P:tm:/R (see .core.cluster_lists)
    P:rx                SET    standalone servers: the tags of threads with a checkpoint whose
                               metadata run_id run_id's index does not hold by its text (not a
                               string, or longer than it holds), which delete_for_runs visits too
    P:tl                ZSET   on a cluster: every threads-by-value list ("K:V" or "/R") by the
                               highest score written ahead into it, so that writers find the
                               idle ones and sweep them (see .core.cluster_lists)
    P:alive             ZSET   the registry of live threads: tag "{T}" -> the unix second until
                               which the thread's keys are due, as a put of its graph's own
                               namespace with a ttl replied (noted at most once per 1/16 of
                               the ttl); persistent, so a volatile-* policy never evicts it. A
                               read that finds no key of a thread asks it: due means evicted
                               whole (ThreadLostError), not new (lua/thread_deadlines.lua)
    P:mk                HASH   the registry of indexed metadata keys: raw K -> "ready" (the
                               index holds every checkpoint) or "building" (added to a store
                               that had checkpoints, or registered again by a put after the
                               registry was lost: reads scan until a reindex completes it;
                               "building:<token>" while a reindex that claimed it runs);
                               THREADS_BY_VALUE for the threads-by-value indexes, the same way
    P:fmt:{P:mk}        STRING the stored format: the lowest release that reads the prefix;
                               absent, as 0.1.0 and this release leave it: 0.1.0's format (see
                               .storeformat); in the slot of P:mk on a cluster

The Lua side of this schema is ``lua/include/keyschema.lua``;
``tests/integration/test_keys.py`` checks that both produce the same keys.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable
from urllib.parse import unquote_to_bytes

_SAFE_BYTES = frozenset((string.ascii_letters + string.digits + "-._~").encode())
_ENCODED_BYTE = [chr(b) if b in _SAFE_BYTES else f"%{b:02X}" for b in range(256)]
_PREFIX_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NOTHING_TO_ESCAPE = re.compile(r"[A-Za-z0-9._~-]*")
EMPTY_THREAD = "%"


def encode_part(value: str) -> str:
    """Percent-encode one key part (see the module docstring)."""
    if _NOTHING_TO_ESCAPE.fullmatch(value):
        return value  # the common case (uuids, versions, plain names): nothing to escape
    return "".join([_ENCODED_BYTE[b] for b in value.encode("utf-8", "surrogatepass")])


def decode_part(encoded: str) -> str:
    """Invert :func:`encode_part`."""
    if "%" not in encoded:
        return encoded
    return unquote_to_bytes(encoded).decode("utf-8", "surrogatepass")


def validate_prefix(prefix: str) -> str:
    if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
        raise ValueError(
            f"invalid key prefix {prefix!r}: use 1-64 characters from A-Z a-z 0-9 _ . - "
            "(no ':', spaces, braces or glob characters, so that key patterns stay exact)"
        )
    return prefix


class KeySchema:
    """Builds the keys of one prefix. Pure functions of their arguments; no I/O."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = validate_prefix(prefix)

    # -- parts ---------------------------------------------------------------------------
    @staticmethod
    def tag(thread_id: str) -> str:
        """The hash tag shared by every key of a thread: ``{T}``."""
        return "{" + (encode_part(thread_id) or EMPTY_THREAD) + "}"

    @staticmethod
    def thread_from_tag(tag: str) -> str:
        inner = tag[1:-1]
        return "" if inner == EMPTY_THREAD else decode_part(inner)

    # -- keys ----------------------------------------------------------------------------
    def thread(self, tag: str) -> str:
        return f"{self.prefix}:th:{tag}"

    def runs(self, tag: str) -> str:
        return f"{self.prefix}:runs:{tag}"

    def thread_ttl(self, tag: str) -> str:
        return f"{self.prefix}:ttl:{tag}"

    def thread_values(self, tag: str) -> str:
        """The threads-by-value indexes the thread is listed in (their suffixes)."""
        return f"{self.prefix}:tv:{tag}"

    def thread_bounds(self, tag: str) -> str:
        """On a cluster: what the threads-by-value lists hold of the thread (see
        .core.cluster_lists)."""
        return f"{self.prefix}:tb:{tag}"

    def gc(self, tag: str) -> str:
        """Root of the garbage a delete, prune or copy done in steps has still to reap."""
        return f"{self.prefix}:gc:{tag}"

    def slot_guard(self, tag: str) -> str:
        """A key of the thread's slot that is never written. Every script call on a cluster
        declares it, so a call while the slot is being moved between nodes is refused by the
        server with TRYAGAIN before the script starts (a migrating slot serves a multi-key
        command only when it holds every key), instead of failing midway on a key that has
        already moved."""
        return f"{self.prefix}:slot:{tag}"

    def format_key(self) -> str:
        """The prefix's stored format (see .storeformat): P:fmt, hash-tagged into the slot of
        the registry P:mk, so that on a cluster a saver depends on the node of one global key
        to start, not on two (its first put writes the registry)."""
        return f"{self.prefix}:fmt:{{{self.metadata_keys()}}}"

    def metadata_keys(self) -> str:
        """The registry of indexed metadata keys (standalone servers)."""
        return f"{self.prefix}:mk"

    def index(self, tag: str, ns: str) -> str:
        return f"{self.prefix}:idx:{tag}:{encode_part(ns)}"

    def writes_index(self, tag: str, ns: str) -> str:
        return f"{self.prefix}:wi:{tag}:{encode_part(ns)}"

    def ledger(self, tag: str, ns: str) -> str:
        """The deadline ledger of a namespace (see the layout in the module docstring)."""
        return f"{self.prefix}:dl:{tag}:{encode_part(ns)}"

    def checkpoint(self, tag: str, ns: str, checkpoint_id: str) -> str:
        return f"{self.prefix}:cp:{tag}:{encode_part(ns)}:{encode_part(checkpoint_id)}"

    def writes(self, tag: str, ns: str, checkpoint_id: str) -> str:
        return f"{self.prefix}:w:{tag}:{encode_part(ns)}:{encode_part(checkpoint_id)}"

    def blob(self, tag: str, ns: str, channel: str, version: str | int | float) -> str:
        return f"{self.prefix}:blob:{tag}:{encode_part(ns)}:{blob_ref(channel, version)}"

    def run(self, tag: str, run_id: str) -> str:
        return f"{self.prefix}:run:{tag}:{encode_part(run_id)}"

    def lists_registry(self) -> str:
        """On a cluster: the threads-by-value lists by the last score written into them, for
        the sweep of idle ones (see .core.cluster_lists)."""
        return f"{self.prefix}:tl"

    def unindexed_runs(self) -> str:
        """Threads with runs that run_id's metadata index does not name by their text
        (standalone servers; see note_unindexed_run in lua/include/indexes.lua)."""
        return f"{self.prefix}:rx"

    def live_threads(self) -> str:
        """The registry of live threads: tag -> the unix second until which it is due (see
        lua/thread_deadlines.lua)."""
        return f"{self.prefix}:alive"

    def metadata_index(self, suffix: str) -> str:
        """A global metadata index; ``suffix`` comes from :func:`metadata_index_suffix`."""
        return f"{self.prefix}:mi:{suffix}"

    def is_metadata_index(self, key: str) -> bool:
        return key.startswith(f"{self.prefix}:mi:")

    def threads_with(self, suffix: str) -> str:
        """A threads-by-value index; ``suffix`` comes from :func:`metadata_index_suffix`."""
        return f"{self.prefix}:tm:{suffix}"

    def is_threads_with(self, key: str) -> bool:
        return key.startswith(f"{self.prefix}:tm:")

    def is_global(self, key: str) -> bool:
        """A key of the whole prefix, not of one thread: a metadata index, a threads-by-value
        index, the registries or the threads with unindexed runs."""
        return (
            self.is_metadata_index(key)
            or self.is_threads_with(key)
            or key
            in (
                self.metadata_keys(),
                self.unindexed_runs(),
                self.lists_registry(),
                self.live_threads(),
            )
        )

    # -- patterns ------------------------------------------------------------------------
    def thread_pattern(self) -> str:
        """SCAN pattern matching the thread index of every thread under this prefix."""
        return f"{self.prefix}:th:*"

    def index_pattern(self) -> str:
        """SCAN pattern matching the namespace index of every thread that has checkpoints."""
        return f"{self.prefix}:idx:*"

    def all_keys_pattern(self) -> str:
        return f"{self.prefix}:*"

    def thread_keys_pattern(self, thread_id: str) -> str:
        """SCAN pattern matching every key of one thread (exact: parts are glob-safe)."""
        return f"{self.prefix}:*:{self.tag(thread_id)}*"

    def thread_id_of(self, thread_key: str) -> str:
        """The thread id of a key returned by a SCAN over :meth:`thread_pattern`."""
        return self.thread_from_tag(thread_key[len(self.prefix) + 4 :])


def tag_of(key: str) -> str | None:
    """The hash tag ``{T}`` of a key, or None for a key of the whole prefix."""
    start = key.find("{")
    end = key.find("}", start)
    return key[start : end + 1] if start >= 0 and end > start else None


# The registry entry (P:mk) of the threads-by-value indexes: a NUL never starts a metadata
# key that a filter can name (see .canonical)
THREADS_BY_VALUE = "\0threads"


def metadata_index_suffix(key: str, canonical: str) -> str:
    """``K:V``: which metadata index a (key, canonical JSON value) pair lives in."""
    return f"{encode_part(key)}:{encode_part(canonical)}"


@functools.lru_cache(maxsize=8192, typed=True)  # (typed: the version 1 is not 1.0)
def blob_ref(channel: str, version: str | int | float) -> str:
    """``C:V``: a blob's key suffix within its (thread, namespace), as stored in ``bv``.
    Remembered: a checkpoint names every channel's version, most of them its parent's."""
    return f"{encode_part(channel)}:{encode_part(str(version))}"


_FIELD_HEADER = re.compile(rb"(\d+):(\d+):")


def parse_record(packed: bytes, start: int = 0) -> dict[bytes, bytes]:
    """The fields of a checkpoint record stored as one string: each field as
    ``<length of the name>:<length of the value>:<name><value>`` (the Lua side, and why:
    ``lua/include/record.lua``), from byte ``start`` on (where a field starts). A header that
    is not two decimal lengths (int() would take a sign, spaces or underscores), or a field
    past the end, is an error."""
    fields: dict[bytes, bytes] = {}
    pos, size = start, len(packed)
    while pos < size:
        header = _FIELD_HEADER.match(packed, pos)
        if header is None:
            raise ValueError(f"corrupt checkpoint record at byte {pos}")
        name_end = header.end() + int(header[1])
        end = name_end + int(header[2])
        if end > size:
            raise ValueError(f"corrupt checkpoint record at byte {pos}")
        fields.setdefault(packed[header.end() : name_end], packed[name_end:end])
        pos = end
    return fields


_LARGE_RANK = {b"md": 1, b"ck": 2}  # the large fields' order (then the writes, by name)


def pack_record(fields: dict[bytes, bytes]) -> bytes:
    """The string of a checkpoint record (see :func:`parse_record`), the small fields first
    (the large ones: ``md``, ``ck`` and the pending writes, ``w:<task id>:<idx>``)."""
    small = [name for name in fields if name not in _LARGE_RANK and not name.startswith(b"w:")]
    large = sorted(set(fields) - set(small), key=lambda name: (_LARGE_RANK.get(name, 3), name))
    return pack_fields((name, fields[name]) for name in small + large)


def pack_fields(fields: Iterable[tuple[bytes, bytes]]) -> bytes:
    """Fields packed as a record holds them, in the order given."""
    return b"".join(b"%d:%d:%s%s" % (len(name), len(value), name, value) for name, value in fields)
