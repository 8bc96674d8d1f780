"""Compression of stored values (checkpoints, channel values, writes, metadata) with zstd.

A value is compressed between the serializer and the cipher: with an ``EncryptedSerializer``
the plaintext is compressed and then encrypted (ciphertext does not compress). A compressed
value's type gets the prefix ``z:`` (``"z:msgpack"``, or ``"z:msgpack+aes"`` once encrypted),
so values written without compression, or by an older version, stay readable, and a saver
with compression turned off still reads compressed values. A serializer's own type that
starts with ``z:`` or ``u:`` is stored behind ``u:``, so it is never taken for a mark.

zstd level 1 by default: on chat messages of real prose it compresses about 2.9x at about
5 us of CPU per KB, level 3 gains 1% for a third more CPU (see benchmarks/README.md).
"""

from __future__ import annotations

import threading
from typing import Any

import zstandard
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

DEFAULT_LEVEL = 1
# Smaller values gain little (a zstd frame costs ~10 bytes) and are most of the calls.
MIN_SIZE = 128
MARK = "z:"
# An uncompressed value whose serializer type starts with a mark gets this one in front too.
ESCAPE = "u:"


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


class ZstdSerializer(SerializerProtocol):
    """Wraps a serializer: compresses what it writes (``level`` None: writes uncompressed)
    and decompresses what carries the ``z:`` mark."""

    def __init__(self, inner: SerializerProtocol, level: int | None) -> None:
        self.inner = inner
        self.level = level
        self._local = threading.local()  # zstd contexts are not thread-safe; reuse per thread

    def _compressor(self) -> zstandard.ZstdCompressor:
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = self._local.compressor = zstandard.ZstdCompressor(level=self.level or 1)
        return compressor

    def _decompressor(self) -> zstandard.ZstdDecompressor:
        decompressor = getattr(self._local, "decompressor", None)
        if decompressor is None:
            decompressor = self._local.decompressor = zstandard.ZstdDecompressor()
        return decompressor

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.inner.dumps_typed(obj)
        if self.level is not None and len(data) >= MIN_SIZE:
            packed = self._compressor().compress(data)
            if len(packed) < len(data):
                return MARK + type_, packed
        if type_.startswith((MARK, ESCAPE)):
            return ESCAPE + type_, data  # the serializer's own type looks like a mark
        return type_, data

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        if type_.startswith(ESCAPE):
            return self.inner.loads_typed((type_[len(ESCAPE) :], payload))
        if type_.startswith(MARK):
            try:
                payload = self._decompressor().decompress(payload)
            except zstandard.ZstdError as exc:
                if "+" in type_:
                    # "z:msgpack+aes" here: encrypted, and this reader has no cipher; the
                    # serializer says so ("Unknown serialization type")
                    return self.inner.loads_typed(data)
                raise ValueError(
                    f"a stored value marked {type_!r} is not valid zstd: {exc}"
                ) from exc
            type_ = type_[len(MARK) :]
        return self.inner.loads_typed((type_, payload))


def with_compression(serde: SerializerProtocol, level: int | None) -> SerializerProtocol:
    """``serde`` as the saver stores with it: compression inside any encryption."""
    if isinstance(serde, EncryptedSerializer):
        return EncryptedSerializer(serde.cipher, ZstdSerializer(serde.serde, level))
    return ZstdSerializer(serde, level)
