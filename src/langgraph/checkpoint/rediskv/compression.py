"""Compression of stored values (checkpoints, channel values, writes, metadata) with zstd.

A value is compressed between the serializer and the cipher: with an ``EncryptedSerializer``
the plaintext is compressed and then encrypted (ciphertext does not compress). A compressed
value's type gets the prefix ``z:`` (``"z:msgpack"``, or ``"z:msgpack+aes"`` once encrypted),
so values written without compression, or by an older version, stay readable, and a saver
with compression turned off still reads compressed values. A serializer's own type that
starts with ``z:`` or ``u:`` is stored behind ``u:``, so it is never taken for a mark.

zstd level 1 by default: on chat messages of real prose it compresses about 2.9x at about
5 us of CPU per KB, level 3 gains 1% for a third more CPU (see benchmarks/README.md).

Reference compression: a channel value can also be stored compressed against an earlier
value of the same channel (its *base*, a blob stored in full), whose serialized bytes serve as
the zstd dictionary. A chat's ``messages`` differs from its previous version by a message or
two, so such a value takes a few hundred bytes where a full one takes kilobytes. Its type is
``zr:<base ref>;<type>``; the base's ref is also listed in every checkpoint record that
references the value, so the base lives as long as the value does (lua/put_checkpoint.lua).
Which base to use is the saver's choice (:class:`BaseCache`); reading needs only the base.

A full value that may serve as a base (of ``REF_MIN_SIZE`` bytes or more) is stored as
``u:b:<mark>;<type>``: the mark is a digest of what follows it (its type, after any cipher's,
and its bytes). A put that sends a value against a base checks that the stored base is still
the value it compressed against by comparing the mark, which it reads from the head of the
blob, whatever the base's size (a base written before marks existed is checked by the SHA1 of
all its bytes); get_tuple leaves out a base the saver holds, by its mark. The same bytes get
the same mark, so a value stored again leaves what is stored as it was. (No earlier version
stored a type that starts with ``u:b:``: it wrote a serializer's type that starts with
``u:`` behind another ``u:``.)
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable
from typing import Any

import zstandard
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

DEFAULT_LEVEL = 1
# Smaller values gain little (a zstd frame costs ~10 bytes) and are most of the calls.
MIN_SIZE = 128
MARK = "z:"
# A value compressed against a base: "zr:<base ref>;<type>" (refs are encoded: never ";").
REF_MARK = "zr:"
# A full value that may serve as a base: "u:b:<mark>;<type>", the mark BASE_MARK_LENGTH hex
# digits of a digest of its type and bytes (see the module docstring)
BASE_MARK = "u:b:"
BASE_MARK_LENGTH = 32
_BASE_MARK = re.compile(rf"{BASE_MARK}[0-9a-f]{{{BASE_MARK_LENGTH}}};")
# An uncompressed value whose serializer type starts with a mark gets this one in front too.
ESCAPE = "u:"
MARKS = (MARK, REF_MARK, ESCAPE)


def with_base_mark(type_: bytes, data: bytes) -> bytes:
    """The stored form (``<type>\\0<bytes>``, ``type_`` after any cipher's) of a full value
    that may serve as a base: with the mark of its type and bytes in front."""
    digest = hashlib.blake2b(type_, digest_size=BASE_MARK_LENGTH // 2)
    digest.update(b"\0")
    digest.update(data)
    return b"".join((BASE_MARK.encode(), digest.hexdigest().encode(), b";", type_, b"\0", data))


def base_mark_length(type_: str) -> int:
    """The length of the base mark ``type_`` starts with (0: none); a malformed one is an
    error that names it."""
    if not type_.startswith(BASE_MARK):
        return 0
    if not _BASE_MARK.match(type_):
        raise ValueError(f"a stored value of type {type_!r} has a malformed base mark")
    return len(BASE_MARK) + BASE_MARK_LENGTH + 1


def compression_level(compression: Any) -> int | None:
    """The ``compression`` option as a zstd level, or None for off."""
    if compression is True:
        return DEFAULT_LEVEL
    if compression is False or compression is None:
        return None
    if isinstance(compression, int) and 1 <= compression <= 22:
        return compression
    raise ValueError(
        f"invalid compression {compression!r}: use True (zstd level {DEFAULT_LEVEL}), "
        "False to store values uncompressed, or a zstd level from 1 to 22"
    )


def stored_base_mark(stored: bytes) -> bytes:
    """The base mark a stored value (``<type>\\0<bytes>``) starts with, ``u:b:<mark>;``, or
    b"" for none."""
    head = stored[: len(BASE_MARK) + BASE_MARK_LENGTH + 1].decode("latin-1")
    return stored[: base_mark_length(head)]


class ZstdSerializer(SerializerProtocol):
    """Wraps a serializer: compresses what it writes (``level`` None: writes uncompressed)
    and decompresses what carries the ``z:`` mark."""

    def __init__(self, inner: SerializerProtocol, level: int | None) -> None:
        self.inner = inner
        self.level = level
        # zstd contexts serve one call at a time: the saver's threads share them (a call
        # takes one out and gives it back), so what it keeps does not grow with its threads
        self.compressors: deque[zstandard.ZstdCompressor] = deque(maxlen=CONTEXTS_KEPT)
        self.decompressors: deque[zstandard.ZstdDecompressor] = deque(maxlen=CONTEXTS_KEPT)
        self.ref_compressors = RefCompressors()
        self.dictionaries = CompressionDictionaries()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return self.pack(*self.inner.dumps_typed(obj))

    def pack(self, type_: str, data: bytes) -> tuple[str, bytes]:
        """The stored form of the serializer's ``(type, bytes)``: compressed when it pays."""
        if self.level is not None and len(data) >= MIN_SIZE:
            try:
                compressor = self.compressors.pop()  # (deque's pop and append are atomic)
            except IndexError:
                compressor = zstandard.ZstdCompressor(level=self.level)
            packed = compressor.compress(data)
            self.compressors.append(compressor)  # (beyond CONTEXTS_KEPT: the oldest out)
            if len(packed) < len(data):
                return MARK + type_, packed
        if type_.startswith(MARKS):
            return ESCAPE + type_, data  # the serializer's own type looks like a mark
        return type_, data

    def pack_against(self, type_: str, data: bytes, base: Base) -> tuple[str, bytes]:
        """The serializer's ``(type, bytes)`` compressed with the serialized bytes of the base
        as dictionary (compression on only)."""
        # with a checksum of the content (4 bytes): decompressed against anything but the
        # base's bytes, the value fails to read instead of coming out wrong
        dictionary = self.dictionaries.get(base, self.level or 1)
        compressor = self.ref_compressors.take(dictionary)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(dict_data=dictionary, write_checksum=True)
        packed = compressor.compress(data)
        self.ref_compressors.give(dictionary, compressor)
        return f"{REF_MARK}{base.ref};{type_}", packed

    def unpack(self, type_: str, payload: bytes, base: Base | None = None) -> tuple[str, bytes]:
        """The serializer's ``(type, bytes)`` of a stored value; ``base``: the base of a value
        compressed against one."""
        type_ = type_[base_mark_length(type_) :]
        if type_.startswith(ESCAPE):
            return type_[len(ESCAPE) :], payload
        if type_.startswith(REF_MARK):
            if base is None:
                raise ValueError(f"a stored value of type {type_!r} is read without its base")
            try:
                decompressor = zstandard.ZstdDecompressor(dict_data=base.dictionary())
                return type_.split(";", 1)[1], decompressor.decompress(payload)
            except zstandard.ZstdError as exc:
                raise ValueError(
                    f"a stored value of type {type_!r} does not decompress with its base: {exc}"
                ) from exc
        if type_.startswith(MARK):
            try:
                try:
                    decompressor = self.decompressors.pop()
                except IndexError:
                    decompressor = zstandard.ZstdDecompressor()
                payload = decompressor.decompress(payload)
                self.decompressors.append(decompressor)
            except zstandard.ZstdError as exc:
                raise ValueError(
                    f"a stored value marked {type_!r} is not valid zstd: {exc}"
                ) from exc
            return type_[len(MARK) :], payload
        return type_, payload

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        try:
            unpacked = self.unpack(type_, payload)
        except ValueError:
            if "+" in type_:
                # "z:msgpack+aes" here: encrypted, and this reader has no cipher; the
                # serializer says so ("Unknown serialization type")
                return self.inner.loads_typed(data)
            raise
        return self.inner.loads_typed(unpacked)


def with_compression(serde: SerializerProtocol, level: int | None) -> SerializerProtocol:
    """``serde`` as the saver stores with it: compression inside any encryption."""
    if isinstance(serde, EncryptedSerializer):
        return EncryptedSerializer(serde.cipher, ZstdSerializer(serde.serde, level))
    return ZstdSerializer(serde, level)


# Reference compression (see the module docstring). Values smaller than this gain too little
# to be worth a dictionary; a value compressed against its base must come to at most this
# share of the base's stored size, else it is stored in full and becomes the next base (the
# further a channel moves from its base, the less the base helps).
REF_MIN_SIZE = 1024
REF_MAX_SHARE = 0.5
# The bases a saver keeps in memory (their serialized and stored bytes), and the zstd tables
# of those it compressed against lately; values are compressed against a base at this level
# at least (see reference_parameters).
BASE_CACHE_BYTES = 32 << 20
COMPRESSION_DICTIONARY_BYTES = 32 << 20
REF_LEVEL = 3
# zstd contexts a saver keeps between calls, whatever the number of its threads: compressors
# against bases (RefCompressors: 1.7 MB each for a base of 200 KB, 11 MB for 4 MB), and
# others and decompressors (ZstdSerializer: 1.3 MB and 0.1 MB each at most at level 1)
REF_COMPRESSORS_KEPT = 8
REF_COMPRESSOR_BYTES = 32 << 20
CONTEXTS_KEPT = 4


class RefCompressors:
    """zstd compressors of the dictionaries compressed against lately, shared by a saver's
    threads. A compressor serves one call at a time (zstd contexts are not thread-safe): a
    call takes one out and gives it back. One made anew costs more than compressing a chat's
    messages against its base (5 ms against 0.2 for a base of 200 KB): between calls the
    REF_COMPRESSORS_KEPT given back last are kept, REF_COMPRESSOR_BYTES of them at most."""

    def __init__(
        self, kept: int = REF_COMPRESSORS_KEPT, max_bytes: int = REF_COMPRESSOR_BYTES
    ) -> None:
        self.kept = kept
        self.max_bytes = max_bytes
        # (dictionary, compressor, its bytes), the most recently given back last
        self._idle: list[tuple[zstandard.ZstdCompressionDict, zstandard.ZstdCompressor, int]]
        self._idle = []
        self._bytes = 0
        self._lock = threading.Lock()

    def take(self, dictionary: zstandard.ZstdCompressionDict) -> zstandard.ZstdCompressor | None:
        """A kept compressor of ``dictionary``, now the caller's (None: none kept)."""
        with self._lock:
            for at in range(len(self._idle) - 1, -1, -1):
                if self._idle[at][0] is dictionary:
                    _, compressor, size = self._idle.pop(at)
                    self._bytes -= size
                    return compressor
        return None

    def give(
        self, dictionary: zstandard.ZstdCompressionDict, compressor: zstandard.ZstdCompressor
    ) -> None:
        """Gives back a compressor of ``dictionary`` (no longer used by the caller)."""
        size = compressor.memory_size()  # (its tables grow to the values it compressed)
        if size > self.max_bytes:
            return
        dropped = []  # (freed outside the lock)
        with self._lock:
            self._idle.append((dictionary, compressor, size))
            self._bytes += size
            while len(self._idle) > self.kept or self._bytes > self.max_bytes:
                dropped.append(self._idle.pop(0))
                self._bytes -= dropped[-1][2]

    def __len__(self) -> int:
        return len(self._idle)

    @property
    def bytes(self) -> int:
        """The bytes of the compressors kept (zstd's count)."""
        return self._bytes


class Base:
    """A full stored value that later values of its channel are compressed against."""

    __slots__ = ("_check", "_dictionary", "mark", "raw", "ref", "stored")

    def __init__(self, ref: str, raw: bytes, stored: bytes) -> None:
        self.ref = ref  # "C:V", encoded, as in bv
        self.raw = raw  # its serialized bytes: the dictionary
        self.stored = stored  # its stored form, "<type>\0<bytes>"
        # the mark it was stored with, "u:b:<mark>;" (b"": stored before marks)
        self.mark = stored_base_mark(stored)
        self._check: str | None = None
        self._dictionary: zstandard.ZstdCompressionDict | None = None

    @property
    def check(self) -> str:
        """What the put compares with the stored base, to know it is still these bytes: its
        mark (``u:b:<mark>;``, the put reads as many bytes of it), or the SHA1 (hex) of the
        stored form of a base without one (written before marks)."""
        if self._check is None:
            mark = self.mark
            self._check = mark.decode() if mark else hashlib.sha1(self.stored).hexdigest()
        return self._check

    @property
    def size(self) -> int:
        """Bytes it holds (what the caches count)."""
        return len(self.raw) + len(self.stored)

    def dictionary(self) -> zstandard.ZstdCompressionDict:
        """Its bytes as a zstd dictionary, for reading the values compressed against it (zstd
        keeps its decompression tables, about the size of the bytes, with it)."""
        if self._dictionary is None:
            self._dictionary = zstandard.ZstdCompressionDict(
                self.raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT
            )
        return self._dictionary


class CompressionDictionaries:
    """Bases digested for compressing against them, the most recently used first, bounded by
    bytes: zstd's tables for a base take several times its size, and a compressor that loads
    a base afresh spends longer on it than on the value (safe to share between threads)."""

    def __init__(self, max_bytes: int = COMPRESSION_DICTIONARY_BYTES) -> None:
        self.max_bytes = max_bytes
        self._dictionaries: OrderedDict[bytes, tuple[zstandard.ZstdCompressionDict, int]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, base: Base, level: int) -> zstandard.ZstdCompressionDict:
        with self._lock:
            found = self._dictionaries.get(base.stored)
            if found is not None:
                self._dictionaries.move_to_end(base.stored)
                return found[0]
        params = reference_parameters(len(base.raw), level)
        dictionary = zstandard.ZstdCompressionDict(
            base.raw, dict_type=zstandard.DICT_TYPE_RAWCONTENT
        )
        dictionary.precompute_compress(compression_params=params)
        # its hash and chain tables (4 bytes an entry) and a copy of the bytes
        size = 4 * ((1 << params.hash_log) + (1 << params.chain_log)) + 2 * len(base.raw)
        with self._lock:
            if base.stored not in self._dictionaries:
                self._dictionaries[base.stored] = (dictionary, size)
                self._bytes += size
                while self._bytes > self.max_bytes and len(self._dictionaries) > 1:
                    _, (_, dropped) = self._dictionaries.popitem(last=False)
                    self._bytes -= dropped
        return dictionary


def reference_parameters(base_size: int, level: int) -> zstandard.ZstdCompressionParameters:
    """zstd's parameters for compressing a value against a base of ``base_size`` bytes: at
    least level 3, with a window and a hash table that reach over the whole base (at level 1
    the fast strategy's table covers some 100 KB of it, so a long chat's messages came out
    tens of KB where they take a few hundred bytes)."""
    level = max(level, REF_LEVEL)
    sized = zstandard.ZstdCompressionParameters.from_level(
        level, source_size=base_size, dict_size=base_size
    )
    window_log = max(sized.window_log, min(27, (2 * base_size).bit_length()))
    hash_log = max(sized.hash_log, min(window_log - 2, 22))
    return zstandard.ZstdCompressionParameters.from_level(
        level,
        source_size=base_size,
        dict_size=base_size,
        window_log=window_log,
        hash_log=hash_log,
    )


class BaseCache:
    """The base of each (hash tag, encoded namespace, channel): the latest full value of it
    that this process wrote, or read with get_tuple. Least recently used out first, bounded
    by bytes. A miss costs only room: the value is stored in full and becomes the base. A base
    that is gone from Redis by now (deleted, pruned, expired) is found out by the put, which
    then sends the value in full."""

    def __init__(self, max_bytes: int = BASE_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._bases: OrderedDict[Hashable, Base] = OrderedDict()
        # (hash tag, encoded namespace) -> its keys, for the keys of that form
        self._namespaces: dict[tuple[Any, Any], set[Hashable]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # one saver serves many threads

    def get(self, key: Hashable) -> Base | None:
        with self._lock:
            base = self._bases.get(key)
            if base is not None:
                self._bases.move_to_end(key)
            return base

    def of_namespace(self, tag: str, ns_enc: str) -> list[Base]:
        """The bases of every channel of a thread's namespace."""
        with self._lock:
            return [self._bases[key] for key in self._namespaces.get((tag, ns_enc), ())]

    def put(self, key: Hashable, base: Base) -> None:
        if base.size > self.max_bytes:
            return
        with self._lock:
            self._remove(key)
            self._bases[key] = base
            self._bytes += base.size
            if isinstance(key, tuple) and len(key) == 3:
                self._namespaces.setdefault(key[:2], set()).add(key)
            while self._bytes > self.max_bytes:
                self._remove(next(iter(self._bases)))

    def _remove(self, key: Hashable) -> None:
        old = self._bases.pop(key, None)
        if old is None:
            return
        self._bytes -= old.size
        if isinstance(key, tuple) and len(key) == 3:
            keys = self._namespaces[key[:2]]
            keys.discard(key)
            if not keys:
                del self._namespaces[key[:2]]

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._remove(key)

    def drop_thread(self, tag: str) -> None:
        with self._lock:
            for key in [k for k in self._bases if isinstance(k, tuple) and k[0] == tag]:
                self._remove(key)
