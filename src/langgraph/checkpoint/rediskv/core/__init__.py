"""The saver's logic, free of I/O (in the sans-I/O style of h11), as a package of small
modules imported one way (docs/architecture.md draws them):

- requests: the request types an operation yields (ScriptCall, ScanKeys, ScanPage, Batch,
  NodeBatch) and the Op/Stream generator types; limits: the tuning limits (Limits);
  rules: the Python half of the rules the scripts share (id_score, index suffixes, ...);
  calls: one ScriptCall builder per script, its header's KEYS then ARGV;
- codec: serialization, compression and records; state: a saver's settings, codec, limits
  and caches (CoreState), which every operation takes first;
- cluster_lists, discovery, paging, merge: the parts listings and jobs are made of;
- writes (put, put_writes), reads (get_tuple, list), listing (list(None)), indexes
  (registry, reindex), jobs (delete, prune, ttl, copy): the operations;
- saver: SaverCore, the CoreState with the operations as methods, which transports hold.

:mod:`..sync` and :mod:`..aio` drive the operations' generators over a sync or an asyncio
redis-py client, standalone or cluster; nothing here knows which. This module re-exports the
names other modules and users import from ``langgraph.checkpoint.rediskv.core``.
"""

from ..errors import (
    CheckpointLostError,
    CopyInterruptedError,
    ListingInterruptedError,
    SerializationError,
    ServerFullError,
    ValueTooLargeError,
)
from .codec import INLINE_MARK, Codec
from .limits import DEFAULT_BULK_LIMIT, MIN_BULK_LIMIT, Limits
from .requests import (
    Arg,
    Batch,
    NodeBatch,
    Op,
    Request,
    ScanKeys,
    ScanPage,
    ScriptCall,
    Stream,
)
from .rules import (
    DEFAULT_INDEXED_METADATA,
    MAX_INDEXED_VALUE,
    TRIGGER_CHANNEL_PREFIX,
    id_score,
    index_suffix,
    thread_id_of,
    thread_indexed,
)
from .saver import SaverCore
from .state import CoreState

# the default page of list(): what the transports hand out at a time
LIST_PAGE = Limits().list_page

__all__ = [
    "DEFAULT_BULK_LIMIT",
    "DEFAULT_INDEXED_METADATA",
    "INLINE_MARK",
    "LIST_PAGE",
    "MAX_INDEXED_VALUE",
    "MIN_BULK_LIMIT",
    "TRIGGER_CHANNEL_PREFIX",
    "Arg",
    "Batch",
    "CheckpointLostError",
    "Codec",
    "CopyInterruptedError",
    "CoreState",
    "Limits",
    "ListingInterruptedError",
    "NodeBatch",
    "Op",
    "Request",
    "SaverCore",
    "ScanKeys",
    "ScanPage",
    "ScriptCall",
    "SerializationError",
    "ServerFullError",
    "Stream",
    "ValueTooLargeError",
    "id_score",
    "index_suffix",
    "thread_id_of",
    "thread_indexed",
]
