"""Step the core's operations with scripted replies, with no server.

Every import of the core's internals the unit tests need is here, and only here: the tests
import them from this module (so a move of the core changes this file alone).

An operation is a generator of requests (``ScriptCall``, ``ScanKeys``, ``ScanPage``,
``Batch``); :class:`Driver` plays the transport's part as ``sync.RedisSaver._run`` and
``_stream`` do: it sends each reply back with ``send()``, and throws an error reply into the
operation with ``throw()`` (the operation may undo what it began, else the error comes out),
after the translation the transport makes of a server's error reply
(``explain_response_error``: "LOST ..." becomes CheckpointLostError, OOM ServerFullError).
A lost script (NOSCRIPT) never reaches an operation: the transport loads the script again and
repeats the call (redis-py's ``Script``), so a script here has no step for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from redis.exceptions import ResponseError

from langgraph.checkpoint.rediskv.compression import DEFAULT_LEVEL, REF_MARK
from langgraph.checkpoint.rediskv.core import (
    Batch,
    Limits,
    NodeBatch,
    Op,
    Request,
    SaverCore,
    ScanKeys,
    ScanPage,
    ScriptCall,
    ServerFullError,
    Stream,
    id_score,
)
from langgraph.checkpoint.rediskv.core.cluster_lists import LIST_MARGIN, score_arg
from langgraph.checkpoint.rediskv.eviction import CheckpointLostError
from langgraph.checkpoint.rediskv.keys import THREADS_BY_VALUE, KeySchema, encode_part, pack_fields
from langgraph.checkpoint.rediskv.transport_support import explain_response_error

# the default limits the operations go by (core.limits.Limits), under the names the tests use
_LIMITS = Limits()
BATCH_SIZE = _LIMITS.batch_size
FIRST_PAGE = _LIMITS.first_page
LIST_PAGE = _LIMITS.list_page
LIST_SCAN_BUDGET = _LIMITS.list_scan_budget
NAMESPACE_CHUNK = _LIMITS.namespace_chunk
REAP_STEP = _LIMITS.reap_step
SCAN_COUNT = _LIMITS.scan_count

__all__ = [
    "BATCH_SIZE",
    "FIRST_PAGE",
    "LIST_MARGIN",
    "LIST_PAGE",
    "LIST_SCAN_BUDGET",
    "NAMESPACE_CHUNK",
    "REAP_STEP",
    "REF_MARK",
    "SCAN_COUNT",
    "THREADS_BY_VALUE",
    "Batch",
    "CheckpointLostError",
    "Driver",
    "Expect",
    "KeySchema",
    "NodeBatch",
    "PutCall",
    "SaverCore",
    "ScanKeys",
    "ScanPage",
    "ScriptCall",
    "ScriptMismatch",
    "ServerFullError",
    "batch",
    "call",
    "each",
    "encode_part",
    "id_score",
    "make_core",
    "page_reply",
    "scan_keys",
    "scan_page",
    "score_arg",
    "stored_record",
]

T = TypeVar("T")


def make_core(prefix: str = "unit", *, cluster: bool = False, **options: Any) -> SaverCore:
    """A SaverCore as a saver builds one (base.py's _setup, and _on_cluster on a cluster),
    with LangGraph's default serializer unless ``serde`` is given; no client, no server."""
    fields: dict[str, Any] = {"compression": DEFAULT_LEVEL, **options}
    indexed = fields.pop("indexed", ("run_id",))
    serde = fields.pop("serde", None) or JsonPlusSerializer()
    if cluster:
        return SaverCore(
            KeySchema(prefix),
            serde,
            indexed=(),
            global_index=False,
            cluster_lists=True,
            **fields,
        )
    return SaverCore(KeySchema(prefix), serde, indexed=indexed, **fields)


@dataclass(frozen=True)
class Expect:
    """One request the operation must make next, and the reply to give it (an exception is
    thrown into the operation; a function is called with the request for the reply).
    ``kind``: the request's class, matched exactly; ``names``: the script name of a
    ScriptCall, the names of a Batch's calls in order (None: any); ``check``: more to
    assert of the request."""

    kind: type
    names: tuple[str, ...] | None
    reply: Any
    check: Callable[[Any], None] | None = None

    def describe(self) -> str:
        return f"{self.kind.__name__}{list(self.names) if self.names is not None else ''}"


def call(name: str, reply: Any, check: Callable[[ScriptCall], None] | None = None) -> Expect:
    return Expect(ScriptCall, (name,), reply, check)


def batch(
    names: Sequence[str] | None,
    replies: Sequence[Any],
    check: Callable[[Batch], None] | None = None,
    kind: type = Batch,
) -> Expect:
    return Expect(kind, tuple(names) if names is not None else None, list(replies), check)


def each(
    names: Sequence[str] | None, reply_of: Callable[[ScriptCall], Any], kind: type = Batch
) -> Expect:
    """A Batch (or NodeBatch) whose calls each get ``reply_of(call)``."""
    return Expect(
        kind,
        tuple(names) if names is not None else None,
        lambda request: [reply_of(c) for c in request.calls],
    )


def scan_keys(keys: Sequence[bytes], check: Callable[[ScanKeys], None] | None = None) -> Expect:
    return Expect(ScanKeys, None, list(keys), check)


def scan_page(
    cursor: str | None, keys: Sequence[bytes], check: Callable[[ScanPage], None] | None = None
) -> Expect:
    return Expect(ScanPage, None, (cursor, list(keys)), check)


def describe(request: Any) -> str:
    """A request in a line: its kind, and its script names and first key."""
    if isinstance(request, ScriptCall):
        return f"ScriptCall[{request.name!r}] keys={list(request.keys)}"
    if isinstance(request, Batch):
        return f"{type(request).__name__}{[c.name for c in request.calls]}"
    if isinstance(request, (ScanKeys, ScanPage)):
        return f"{type(request).__name__}(match={request.match!r})"
    return f"{type(request).__name__} (not a request)"


class ScriptMismatch(AssertionError):
    """The operation made another request than the script expected, or too many."""


class Driver:
    """Steps operations through a script of expected requests and their replies.

    ``requests``: every request the operations made, in order (the replies the script gave
    them are in ``replies``); typed Any, as a test reads the fields of the kind it expects."""

    def __init__(self, core: SaverCore, script: Iterable[Expect] = ()) -> None:
        self.core = core
        self.script: deque[Expect] = deque(script)
        self.requests: list[Any] = []
        self.replies: list[Any] = []

    def expect(self, *steps: Expect) -> Driver:
        self.script.extend(steps)
        return self

    def _reply(self, request: Request) -> Any:
        """The scripted reply to ``request`` (an exception: raised, translated as the
        transport translates a server's error reply)."""
        if not self.script:
            raise ScriptMismatch(
                f"request #{len(self.requests) + 1} {describe(request)} came after the script ended"
            )
        step = self.script.popleft()
        names: tuple[str, ...] | None = None
        if isinstance(request, ScriptCall):
            names = (request.name,)
        elif isinstance(request, Batch):
            names = tuple(c.name for c in request.calls)
        kind = type(request)  # (exactly: a NodeBatch is not taken for a Batch)
        if kind is not step.kind or (step.names is not None and names != step.names):
            raise ScriptMismatch(
                f"request #{len(self.requests) + 1}: {describe(request)} came where "
                f"{step.describe()} was expected"
            )
        self.requests.append(request)
        if step.check is not None:
            step.check(request)
        reply = step.reply(request) if callable(step.reply) else step.reply
        self.replies.append(reply)
        if isinstance(reply, ResponseError):
            raise explain_response_error(request, reply)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(request, Batch) and len(reply) != len(request.calls):
            raise ScriptMismatch(
                f"{describe(request)}: the script has {len(reply)} replies for "
                f"{len(request.calls)} calls"
            )
        return reply

    def run(self, op: Op[T]) -> T:
        """An operation's result (as sync.RedisSaver._run)."""
        try:
            request = next(op)
            while True:
                try:
                    reply = self._reply(request)
                except ScriptMismatch:
                    op.close()
                    raise
                except Exception as exc:  # the op may undo what it began; else it raises exc
                    request = op.throw(exc)
                else:
                    request = op.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def stream(self, stream: Stream) -> list[CheckpointTuple]:
        """Every tuple of a listing (as sync.RedisSaver._stream: an error reply ends it)."""
        out: list[CheckpointTuple] = []
        reply: Any = None
        try:
            while True:
                try:
                    item = stream.send(reply)
                except StopIteration:
                    return out
                if isinstance(item, CheckpointTuple):
                    reply = None
                    out.append(item)
                else:
                    reply = self._reply(item)
        finally:
            stream.close()

    def done(self) -> None:
        """Assert that the script was played to its end."""
        if self.script:
            raise ScriptMismatch(
                f"{len(self.script)} expected requests never came, the first "
                f"{self.script[0].describe()}"
            )

    def calls(self, name: str) -> list[ScriptCall]:
        """The calls of script ``name`` made so far, alone or in batches."""
        out: list[ScriptCall] = []
        for request in self.requests:
            if isinstance(request, ScriptCall) and request.name == name:
                out.append(request)
            elif isinstance(request, Batch):
                out += [c for c in request.calls if c.name == name]
        return out


def stored_record(
    core: SaverCore,
    parent_config: Any,
    checkpoint: Any,
    metadata: CheckpointMetadata,
    blobs: dict[str, bytes] | None = None,
) -> list[Any]:
    """The reply of a read of ``checkpoint`` once put after ``parent_config`` (every channel
    version new): its put stepped, and its call read back as the record it writes.
    ``blobs``: the blobs stored before, by ref (the put's are added)."""
    driver = Driver(core)
    if (core.global_index or core.cluster_lists) and not core.registered:
        driver.expect(call("register_metadata_index", []))
    driver.expect(call("put_checkpoint", 0))
    versions = dict(checkpoint["channel_versions"])
    driver.run(core.put(parent_config, checkpoint, metadata, versions))
    driver.done()
    return PutCall(driver.calls("put_checkpoint")[0]).record({} if blobs is None else blobs)


def page_reply(records: Sequence[list[Any]], request: ScriptCall) -> list[Any]:
    """list_checkpoints.lua's reply over ``records`` (newest first) to ``request``: those
    below its ``before`` (ARGV[6]), a page (ARGV[7]) of them, and the cursor, the last id
    given, or nil when none is left; a negative page: heads ({ns, id}) only. The filter and
    only-id arguments are not applied: a test passes the records that match them."""
    before_arg, size = request.args[5], int(request.args[6])
    before = before_arg if isinstance(before_arg, bytes) else str(before_arg).encode()
    below = [r for r in records if not before or r[1] < before]
    page = below[: abs(size)]
    cursor = page[-1][1] if len(below) > len(page) else None
    return [cursor, *([r[0], r[1]] if size < 0 else r for r in page)]


@dataclass(frozen=True)
class PutCall:
    """A put_checkpoint call read as its header in lua/put_checkpoint.lua lays it out."""

    request: ScriptCall

    @property
    def args(self) -> Sequence[Any]:
        return self.request.args

    @property
    def checkpoint_id(self) -> str:
        return str(self.args[3])

    @property
    def parent_id(self) -> str:
        return str(self.args[4])

    @property
    def value_refs(self) -> list[str]:
        """ARGV[8] before ",,": the refs of every channel with a value."""
        return [r for r in str(self.args[7]).split(",,")[0].split(",") if r]

    @property
    def base_refs(self) -> list[str]:
        """ARGV[8] after ",,": the bases of the values this call sends."""
        return [r for r in str(self.args[7]).split(",,")[1].split(",") if r]

    def _groups(self) -> tuple[list[Any], dict[str, bytes], list[str], dict[str, str]]:
        args = list(self.args)
        m = int(args[15])  # (ARGV[16]: after the deadline noted last, ARGV[15])
        at = 16 + 3 * m
        meta = args[16:at]
        b = int(args[at])
        blobs = {
            str(r): bytes(v)
            for r, v in zip(
                args[at + 1 : at + 1 + 2 * b : 2], args[at + 2 : at + 2 + 2 * b : 2], strict=True
            )
        }
        at += 1 + 2 * b
        s = int(args[at])
        shared = [str(r) for r in args[at + 1 : at + 1 + s]]
        at += 1 + s
        d = int(args[at])
        bases = {
            str(r): str(c)
            for r, c in zip(
                args[at + 1 : at + 1 + 2 * d : 2], args[at + 2 : at + 2 + 2 * d : 2], strict=True
            )
        }
        assert at + 1 + 2 * d == len(args), "put_checkpoint: arguments past the last group"
        return meta, blobs, shared, bases

    @property
    def metadata_triples(self) -> list[tuple[str, str, str]]:
        meta = self._groups()[0]
        return [tuple(meta[i : i + 3]) for i in range(0, len(meta), 3)]

    @property
    def blobs(self) -> dict[str, bytes]:
        """The new blobs: ref -> "<type>\\0<bytes>"."""
        return self._groups()[1]

    @property
    def shared(self) -> list[str]:
        """The refs of blobs stored before."""
        return self._groups()[2]

    @property
    def bases(self) -> dict[str, str]:
        """The bases: ref -> the check the stored base must pass."""
        return self._groups()[3]

    def record(self, stored: dict[str, bytes]) -> list[Any]:
        """get_tuple's reply for this checkpoint once stored (include/records.lua's
        load_checkpoint): { ns, id, record, {ref, value, ...}, {}, parent | nil, large },
        the record as put_checkpoint.lua writes it: small fields first (its filter fields,
        ARGV[6], here after p and bv), then md and ck (ARGV[7]). ``stored``: every blob
        stored, by ref (this call's are added to it)."""
        stored.update(self.blobs)
        refs = [*self.value_refs, *self.base_refs]
        small = pack_fields([(b"p", self.parent_id.encode()), (b"bv", ",".join(refs).encode())])
        small += bytes(self.args[5])
        blobs: list[bytes] = []
        for ref in dict.fromkeys(refs):
            blobs += [ref.encode(), stored[ref]]
        return [
            str(self.args[2]).encode(),
            self.checkpoint_id.encode(),
            small + bytes(self.args[6]),
            blobs,
            [],
            self.parent_id.encode() if self.parent_id else None,
            len(small) + 1,  # (a Lua position: from 1)
        ]
