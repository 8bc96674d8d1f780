"""How values are stored and read back: serialization, compression against bases, the cipher,
and the records the scripts return decoded into CheckpointTuples."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import zstandard
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, PendingWrite, writes_sort_key
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from ..canonical import canonical
from ..compression import (
    REF_MARK,
    REF_MAX_SHARE,
    REF_MIN_SIZE,
    Base,
    BaseCache,
    ZstdSerializer,
    with_base_mark,
    with_compression,
)
from ..errors import SerializationError
from ..keys import KeySchema, decode_part, parse_record
from .rules import config_of

# The stored checkpoint of a record holding inline values starts with this mark. It cannot
# start a stored value otherwise ("u:" escapes only types that start with a mark, "u:" among
# them, and the base mark is "u:b:": compression.py), and
# a reader older than the mark refuses it ("Unknown serialization type") rather than
# returning the checkpoint without those values.
INLINE_MARK = b"u:i:"
REF_MARK_B = REF_MARK.encode()


@dataclass(frozen=True, slots=True)
class Codec:
    """One saver's serializer, wrapped for storage (compression inside any encryption), and
    the bases its channel values are compressed against."""

    keys: KeySchema  # (names a corrupt record in errors)
    serde: SerializerProtocol  # the saver's serializer; values are stored with `storage`
    compression: int | None  # zstd level of stored values, None for uncompressed
    keep_last: int  # 1: values are stored in full (a base would outweigh a single value)
    # the bases channel values are compressed against (mutable on purpose: a per-saver cache)
    bases: BaseCache
    # the bases of the values read lately, by their stored bytes (see base)
    read_bases: BaseCache
    ref_min_size: int = REF_MIN_SIZE
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
                zstd.level is not None and len(raw) >= self.ref_min_size and self.keep_last != 1
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
            if self.zstd.level is None or len(raw) < self.ref_min_size:
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
    def write_record(task_path: str, channel: str, stored: bytes) -> bytes:
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
            config=config_of(thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,
            metadata=self.loads(md),
            parent_config=config_of(thread_id, ns, parent.decode()) if parent else None,
            pending_writes=self.pending_writes(writes),
        )
