"""Copy threads from another checkpointer into this one, and check the copy.

::

    from langgraph.checkpoint.rediskv import RedisSaver
    from langgraph.checkpoint.rediskv.migrate import migrate, open_source

    with open_source("postgresql://user@host/db") as source, RedisSaver(url) as target:
        report = migrate(source, target)
    assert report.ok, report.problems()

What is copied, per thread and per namespace (the root ``""`` and every subgraph's): every
checkpoint, oldest first, with ``put(config_with_parent, checkpoint, metadata, versions)``
(``versions`` names every channel that has a value, so every value is stored, whatever the
source's ``new_versions`` were), then its pending writes with ``put_writes(config, writes,
task_id, task_path)``, one call per task. Checkpoint ids are kept.

Delta channels: a checkpoint that stores no value of a ``DeltaChannel`` is rebuilt from its
ancestors (``get_delta_channel_history``), which the source need not list: a rediskv saver with
``keep_last`` keeps them hidden. So the ancestors a listed checkpoint's delta channels (those
of its metadata ``counters_since_delta_snapshot``) are rebuilt from, back to the ones storing
a value of every such channel, are read (:meth:`Source.ancestor`) and copied too; the target,
which keeps every checkpoint, lists them. After the copy, each chain of checkpoints (its oldest
one, whose parent was not copied) and the latest of each namespace are rebuilt on both sides:
``get_delta_channel_history`` must give the same seed and writes. A thread whose history could
not be carried (an ancestor the source no longer gives) is "incomplete", with a problem naming
the checkpoint and channel.

Resuming: a thread whose checkpoint ids are all in the target already is skipped ("present");
one the target holds part of (an interrupted run) is copied again: a put of an id the target
has replaces it, and a pending write already stored is kept (the first write of a task and
slot wins), so nothing is duplicated. A thread whose copy in the target has checkpoints the
source lacks (the application went on writing there) is a "conflict": it is left alone.

Verification (on by default) reads both sides back: ``list`` of each namespace must give the
same checkpoint ids in the same order, and for each checkpoint ``get_tuple`` of the target
(and the listed tuples of both sides) must give the same checkpoint (values, versions,
versions seen), metadata, parent and pending writes; ``get_tuple`` without an id (the latest)
must agree too. Metadata is compared as this saver stores it (a legacy ``writes`` key dropped).

Sources: :func:`open_source` opens one from a URL (see :data:`SOURCE_SCHEMES`); any other
saver with the synchronous API is used through :class:`Source`, which finds the threads with
``list(None)``. The task path of a pending write is not part of ``CheckpointTuple``: the
Postgres, SQLite, langgraph-checkpoint-redis, in-memory and rediskv sources read it from their
storage (the order a superstep's writes are replayed in, a DeltaChannel's among them); the
others do not store it (it is copied as ``""``).

The package, by what its parts do (each imports only those listed before it):
``common`` (reading a ``CheckpointTuple``, the copied form), ``source`` (:class:`Source`;
what a rediskv source keeps hidden it reads with the saver's ``get_kept_tuple`` and
``get_task_paths``), ``sources_sql`` and ``sources_redis`` (the
presets), ``sources`` (:func:`open_source`), ``verify`` (the comparison), ``report`` and
``run`` (:func:`migrate`).
"""

from __future__ import annotations

from ..sync import WRITE_PATHS_BATCH as WRITE_PATHS_BATCH

# the names public before the split (migrate.py), each from the module that defines it;
# those outside __all__ stay importable (``X as X``: a re-export)
from .common import WriteKey as WriteKey
from .common import target_form as target_form
from .report import MigrationReport, ThreadReport
from .report import Status as Status
from .run import migrate
from .source import Source
from .sources import SOURCE_SCHEMES, open_source
from .verify import delta_differences, verify_thread

__all__ = [
    "SOURCE_SCHEMES",
    "MigrationReport",
    "Source",
    "ThreadReport",
    "delta_differences",
    "migrate",
    "open_source",
    "verify_thread",
]
