"""What the sync and the async saver share: settings, the core, and error translation."""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    AskError,
    ClusterError,
    InvalidResponse,
    MovedError,
    NoScriptError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .core import Request, SaverCore, ScriptCall
from .errors import RedisUnavailableError as RedisUnavailableError  # (re-exported)
from .keys import KeySchema, tag_of
from .options import SaverSettings
from .settings import redact_url
from .transport_support import explain_response_error

F = TypeVar("F", bound=Callable[..., Any])

# A call of a cluster pipeline that failed with one of these goes again on its own: its slot
# was moving (TRYAGAIN, MOVED, ASK: the single call waits the move out), or its node lost
# the scripts (a restart: the single call loads them again).
RUN_ALONE = (TryAgainError, ClusterError, MovedError, AskError, NoScriptError)


def documented_as(
    source: Callable[..., Any], how: str, raises: str | None = None
) -> Callable[[F], F]:
    """Give the decorated method ``source``'s docstring (Args, Returns, Raises), ``how`` as
    its first line and ``raises`` added to its Raises: for the sync methods of the async
    saver and the async methods of the sync saver, which only hand a call over. ``how``
    may name the source as ``{name}``."""

    def document(method: F) -> F:
        doc = inspect.cleandoc(source.__doc__ or "")
        if raises is not None:
            doc += "\n    " + raises
        method.__doc__ = f"{how.format(name=source.__name__)}\n\n{doc}"
        return method

    return document


def retry_backoff() -> ExponentialWithJitterBackoff:
    return ExponentialWithJitterBackoff(base=0.05, cap=1.0)


class RedisSaverBase(BaseCheckpointSaver[str]):
    """Settings and the I/O-free core; subclasses add a transport."""

    _core: SaverCore
    settings: SaverSettings  # the options the saver was made with, validated
    _serde: SerializerProtocol = JsonPlusSerializer()
    _owns_client: bool
    _url: str
    _max_bulk: int | None = None  # the server's proto-max-bulk-len, once asked

    def _setup(
        self, settings: SaverSettings, client: Any, serde: SerializerProtocol | None
    ) -> None:
        """Take the (validated) settings: the core made from them, the URL described."""
        super().__init__(serde=serde)
        self.settings = settings
        self._core = SaverCore(
            KeySchema(settings.prefix),
            self.serde,
            settings.ttl,
            settings.index_metadata,
            compression=settings.compression,
            keep_last=settings.keep_last,
            on_lost_checkpoint=settings.on_lost_checkpoint,
            limits=settings.limits,
        )
        if client is None and settings.url is None:
            raise ValueError(
                "these settings hold no URL (made with client_given=True): pass client=, or "
                "make them with a url"
            )
        self._owns_client = client is None
        self._url = _describe_client(client) if client is not None else str(settings.url)

    # The serializer lives in the core; keep them in step when LangGraph swaps it
    # (BaseCheckpointSaver.with_allowlist assigns `serde` on a shallow copy).
    @property
    def serde(self) -> SerializerProtocol:
        """The serializer of checkpoints and values (LangGraph's JsonPlusSerializer by
        default); assigning one makes the saver use it from then on."""
        return self._serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self._serde = maybe_add_typed_methods(value)
        if "_core" in self.__dict__:
            self._core = self._core.with_serde(self._serde)

    def _on_cluster(self) -> None:
        """A cluster spreads threads over nodes: a global index cannot be updated in the same
        script as a thread's keys. So there are no metadata indexes, and the threads-by-value
        lists are written ahead by the client (see .core.cluster_lists)."""
        self._core = replace(self._core, indexed=(), global_index=False, cluster_lists=True)

    @property
    def indexed_metadata(self) -> tuple[str, ...]:
        """The metadata keys with a global index (none on a cluster)."""
        return self._core.indexed

    @property
    def prefix(self) -> str:
        """The first part of every key the saver writes."""
        return self._core.keys.prefix

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions unique across forks (as InMemorySaver makes them): a run resumed from an
        old checkpoint never writes a blob under a version that a stored checkpoint uses.

        ``<counter, 16 digits>.<32 random bits, hex>``: ordered by the counter, and half the
        length of InMemorySaver's (versions are part of keys and of every checkpoint).

        Args:
            current: the channel's current version, or None for a new channel.
            channel: unused (LangGraph's signature).

        Returns:
            The next version.

        Raises:
            ValueError: ``current`` is not a version the saver made.
        """
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:016}.{random.getrandbits(32):08x}"

    def _guarded(self, call: ScriptCall) -> ScriptCall:
        """The call with its thread's slot guard declared (see KeySchema.slot_guard)."""
        tag = tag_of(call.keys[0]) if call.keys else None
        if tag is None:
            return call
        return replace(call, keys=(*call.keys, self._core.keys.slot_guard(tag)))

    def _slot_moving(self, call: ScriptCall, waited: float) -> RedisUnavailableError:
        return RedisUnavailableError(
            f"the cluster slot of {call.keys[0]!r} is being moved between nodes and the move "
            f"did not end within {waited:.1f} s; {call.name} was not run, nothing was written"
        )

    def _translated(self, exc: BaseException, request: Request | None = None) -> BaseException:
        """The one place redis-py's errors become the saver's: an unreachable server (or one
        that does not speak the protocol) is a RedisUnavailableError naming it; a server's
        error reply to ``request`` a clearer error where the saver knows its cause; a
        cluster client's failure as ``_cluster_failure`` says. Anything else (the saver's own
        errors among them) is ``exc`` itself."""
        if isinstance(exc, RedisUnavailableError):
            return exc  # (already the saver's: a ReplicationError, a slot that kept moving)
        if isinstance(exc, UNAVAILABLE):
            return self._unavailable(exc)
        if isinstance(exc, RedisClusterException):
            return self._cluster_failure(exc)
        if isinstance(exc, ResponseError) and request is not None:
            return self._explain(request, exc)
        return exc

    def _raise_translated(self, exc: BaseException, request: Request | None = None) -> NoReturn:
        """Raise ``exc`` as ``_translated`` says (from ``exc`` when that is another error)."""
        translated = self._translated(exc, request)
        if translated is exc:
            raise exc
        raise translated from exc

    def _unavailable(self, exc: BaseException) -> RedisUnavailableError:
        if isinstance(exc, InvalidResponse):
            return RedisUnavailableError(
                f"the server at {redact_url(self._url)} does not answer in the Redis protocol "
                f"({exc}): is that the port of a Redis or Valkey server?"
            )
        return RedisUnavailableError(f"cannot reach Redis at {redact_url(self._url)}: {exc}")

    def _explain(self, request: Request, exc: ResponseError) -> BaseException:
        """A clearer error for a server's error reply (see explain_response_error); a
        cluster's redirect met by a saver made for a standalone server names the setting."""
        text = str(exc)
        redirected = isinstance(exc, (MovedError, AskError)) or any(
            sign in text for sign in CLUSTER_REFUSALS
        )
        if redirected and not self._core.cluster_lists:
            return not_a_cluster_client(self._url, exc)
        return explain_response_error(request, exc)

    def _cluster_failure(self, exc: RedisClusterException) -> BaseException:
        """What redis-py's cluster client raised, as the saver says it (see
        :func:`cluster_failure`)."""
        return cluster_failure(self._url, exc)


def cluster_failure(url: str, exc: RedisClusterException) -> BaseException:
    """What redis-py's cluster client raised, as the savers and the store say it: a server
    that is not a cluster is a mistake of the settings (``cluster=True``); no node that
    answers (it says "cannot be connected" when it reads the slot map) is unavailability;
    anything else (keys in two slots, a slot no node serves) stays redis-py's."""
    if "Cluster mode is not enabled" in str(exc):
        return ValueError(
            f"cluster=True, but the server at {redact_url(url)} is not a Redis "
            "Cluster (cluster mode is not enabled there): leave cluster out for a "
            "standalone server"
        )
    if "cannot be connected" in str(exc):
        return RedisUnavailableError(f"cannot reach Redis at {redact_url(url)}: {exc}")
    return exc


# What a cluster node answers to a script of a saver made for a standalone server, whose keys
# span slots (Redis 7, Valkey 9), besides MOVED and ASK.
CLUSTER_REFUSALS = ("CROSSSLOT", "do not hash to the same slot", "non local key")

MIN_SERVER_VERSION = (7, 0)  # the scripts carry Redis 7 script flags (Valkey says 7.2 here)


def check_server(url: str, info: dict[str, Any], cluster_client: bool) -> None:
    """Refuse a server the saver cannot run on, from its INFO reply (on a cluster, a reply
    per node): older than Redis 7.0, or a cluster node for a saver made without
    ``cluster=True`` (every call would come back MOVED or CROSSSLOT)."""
    per_node = bool(info) and all(isinstance(v, dict) for v in info.values())
    replies = list(info.values()) if per_node else [info]
    for reply in replies:
        version = str(reply.get("redis_version", "0"))
        numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
        if numbers < MIN_SERVER_VERSION:
            raise ValueError(
                f"the server at {redact_url(url)} is Redis {version}: the saver needs Redis "
                "7.0 or later, or Valkey 7.2 or later"
            )
        if str(reply.get("cluster_enabled", "0")) == "1" and not cluster_client:
            raise ValueError(
                f"the server at {redact_url(url)} is a Redis Cluster node: make the saver "
                "with cluster=True"
            )


def not_a_cluster_client(url: str, exc: Exception) -> ValueError:
    """A cluster's redirect (MOVED, ASK) or CROSSSLOT reply, met by a saver made without
    ``cluster=True``: its settings are wrong; nothing ran."""
    return ValueError(
        f"the server at {redact_url(url)} is a Redis Cluster node and refused a call "
        f"({str(exc).split(chr(10))[0][:80]}): make the saver with cluster=True; nothing "
        "was written"
    )


# InvalidResponse: something other than Redis answers (a web server on the port, say)
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, InvalidResponse)


def refuse_decoding_client(
    client: Any,
    bytes_stored: str = "checkpoints are stored as bytes: give the saver a client, or a URL "
    "and options, without decode_responses",
) -> None:
    """A client that decodes replies into text (``decode_responses=True``) cannot read the
    saver's values, which are bytes: refused before anything is written. ``bytes_stored``:
    what is stored as bytes and what to do (the store's vectors say theirs)."""
    encoder = client.get_encoder() if hasattr(client, "get_encoder") else None
    if getattr(encoder, "decode_responses", False):
        raise ValueError(
            f"the Redis client decodes replies into text (decode_responses=True), but "
            f"{bytes_stored}"
        )


def _describe_client(client: Any) -> str:
    try:
        kwargs = client.connection_pool.connection_kwargs
        if "path" in kwargs:
            return f"unix://{kwargs['path']}"
        return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
    except AttributeError:
        return repr(client)
