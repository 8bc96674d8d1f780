"""The registry of live threads (``P:alive``, lua/thread_deadlines.lua): what tells a thread
the server evicted whole from one that never existed or expired.

Eviction (a ``volatile-*`` policy with a ttl, any ``allkeys-*`` one) can take every key under a
thread's hash tag, and then nothing in its slot says it existed: its next read would find a
new thread, and its next turn would start it again over the lost conversation. So a put of
the graph's own namespace with a ttl replies the deadline until which the thread's keys are
due, and the saver notes it in the registry, outside the thread's slot and without an expiry
(a ``volatile-*`` policy never evicts it). A read that finds no key of the thread asks the
registry: a deadline not passed is a thread evicted whole (ThreadLostError).

What it costs: on a cluster, one round trip on the first read of a new chat (the read found
nothing; also on a prefix without any ttl), none on a standalone server, where the read's
script asks the registry itself (registry_for_reads); and one on a put each time the
thread's deadline has moved by 1/16 of the ttl since this saver last noted it (a chat's
first put, then about every ttl/16). The put sends the deadline noted last and the script
decides, on the server's clock alone (put_checkpoint.lua's NOTE_EVERY): a client clock hours
off notes neither every put nor too late. What it leaves silent: a thread evicted whole
within the last 1/16 of its ttl (its noted deadline lags the real one by that much at most,
when only this saver writes it), and one read-only for longer (refresh_on_read renews the
keys, not the registry).

No false alarm: the ledger of the thread's graph namespace outlives every deadline noted
(lua/include/ledger.lua's missing_root), so a thread emptied by delete_for_runs, or deleted or
shortened by release 0.1.0 (which knows no registry), reads as new. A delete (delete_thread,
prune delete_all) takes the thread out before and after, and holds it a minute against a note
of a put that raced it (forget(deleted=True)); set_thread_ttl takes it out, then notes the new
deadline (note_set), or leaves it out when pinned or back to the default (the next put notes
it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ThreadLostError
from . import calls
from .requests import Op, ScriptCall
from .state import CoreState

# forget() sends the tags in chunks of this many
FORGET_CHUNK = 1000


def note_put(core: CoreState, tag: str, deadline: int) -> Op[None]:
    """After a put: note the deadline it replied (0: none, not the graph's namespace, or the
    one this saver noted last, which it sent, lags it by less than 1/16 of the ttl)."""
    noted = core.noted_deadlines
    if not deadline:
        return
    taken = yield calls.thread_deadlines(
        core.keys.live_threads(), mode="note", operands=(deadline, tag)
    )
    if taken:  # (else the thread was deleted a moment ago: its next put notes it)
        noted.noted(tag, deadline)


def note_set(core: CoreState, tag: str, seconds: int, took: float) -> Op[None]:
    """After a ttl job gave every key of the thread ``seconds`` more (from when each key was
    reached): its deadline, ``seconds`` from the server's clock less the time the job
    ``took`` and two seconds, so never later than a key's expiry. (A thread given a longer
    ttl to keep an idle conversation may see no put for a long time.)"""
    core.noted_deadlines.drop(tag)
    left = seconds - math.ceil(took) - 2
    if left > 0:
        yield calls.thread_deadlines(core.keys.live_threads(), mode="set", operands=(left, tag))


def registry_for_reads(core: CoreState) -> str | None:
    """The registry's key for a read to ask itself when it finds no key of the thread, on a
    standalone server (one round trip for the first read of every new chat, not two); None
    on a cluster, where it lives on another node than the thread (confirm_untraced asks)."""
    return core.keys.live_threads() if core.global_index else None


def confirm_untraced(
    core: CoreState, thread_id: str, tag: str, again: Callable[[], ScriptCall]
) -> Op[Any]:
    """A read found no key of the thread (its script replied 0). None when the registry does
    not hold it as due (a new or expired thread); else the read sent again (another writer
    may have started the thread meanwhile, and noted it) when it finds the thread; else
    ThreadLostError."""
    deadline = yield calls.thread_deadlines(core.keys.live_threads(), mode="due", operands=(tag,))
    if deadline is None:
        return None
    reply = yield again()
    if reply != 0:
        return reply
    raise ThreadLostError(thread_id, core.keys.thread(tag), int(deadline))


def forget(core: CoreState, tags: Sequence[str], deleted: bool = False) -> Op[None]:
    """Take threads out of the registry (and out of what this saver noted). ``deleted``: the
    threads are being deleted, and the registry refuses notes for them for a minute (a put
    that raced the delete would note a thread that is gone)."""
    for tag in tags:
        core.noted_deadlines.drop(tag)
    mode = "deleted" if deleted else "forget"
    for start in range(0, len(tags), FORGET_CHUNK):
        chunk = tags[start : start + FORGET_CHUNK]
        yield calls.thread_deadlines(core.keys.live_threads(), mode=mode, operands=chunk)
