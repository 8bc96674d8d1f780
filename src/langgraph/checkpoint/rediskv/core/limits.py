"""Tuning limits: how much one call, one round trip or the client's memory takes on.

They change no stored byte, only how work is cut into steps, so a test may pass smaller ones
(``SaverSettings.from_kwargs(url, limits=Limits(list_window=2))``, see options.py) to reach
a path that would otherwise need a store of thousands of threads. The marks and words of the
stored format are not limits: they live with the code that writes them (codec, rules, keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compression import REF_MIN_SIZE

# proto-max-bulk-len cannot be set below 1 MB, and is 512 MB unless set: only calls with an
# argument longer than the first need a look at the server's limit (the transports).
MIN_BULK_LIMIT = 1 << 20
DEFAULT_BULK_LIMIT = 512 << 20


@dataclass(frozen=True, slots=True)
class Limits:
    """The saver's tuning limits; the defaults are the measured ones (benchmarks/)."""

    # list pages: at most this many checkpoints per script call (one round trip for
    # limit <= 100), and at most this many ids examined per call while a filter rejects
    # them (about 10 ms of server time; see benchmarks/server_time.py).
    list_page: int = 100
    list_scan_budget: int = 1000
    # threads-by-value candidates read per call (a value of fewer threads is read whole, at
    # once), and visited per round trip at the least
    candidate_chunk: int = 10_000
    candidate_group: int = 8
    # on a cluster: how long a saver trusts that the threads-by-value lists are complete
    # before it asks again (a round trip a minute, where every filtered listing asked)
    ready_known_for: float = 60.0
    # on a cluster: candidate threads asked their newest score per round trip (see
    # cluster_lists.probe)
    probe_group: int = 100
    # A merge of more threads than this (list(None) over a large store) keeps pages of at
    # most this many of them, and of the others only the id of their next checkpoint: the
    # client's memory stays at list_window pages and an id per thread, however many threads
    # and checkpoints the listing goes through (see merge.StreamMerge).
    list_window: int = 256
    head_group: int = 32  # heads whose pages are read in one round trip
    # list(None) without a limit goes thread by thread: the first pages of this many threads
    # (of at most first_page checkpoints each) in one round trip, a thread's further pages
    # alone.
    thread_group: int = 32
    first_page: int = 4
    # list(None, limit=L) over every thread chooses the ids first: each thread's newest
    # first_ids (at most L), more only while they may be among the newest L, about
    # select_ids ids a round trip (see listing.select_newest)
    first_ids: int = 10
    select_ids: int = 5000
    # A thread with more namespaces than this is listed in chunks of them, merged by the
    # client, so that no call reads the heads of more than this many namespace indexes.
    namespace_chunk: int = 500
    # SCAN COUNT hint, and how many per-thread script calls go into one pipeline.
    scan_count: int = 1000
    batch_size: int = 500
    # checkpoints a reindex_thread call visits at most
    reindex_step: int = 500
    # on_lost_checkpoint="fall_back": checkpoint ids listed per call while looking for the
    # newest complete one
    fall_back_page: int = 50
    # A write retried after "REAPING" or missing blobs: each retry makes progress, so a few
    # suffice.
    put_attempts: int = 5
    # Whole-thread jobs: work per script call, in units of about one Redis command: at most
    # about 25 ms of server time at 200,000 checkpoints (benchmarks/server_time.py; 1,500
    # reached 49 ms in one run).
    reap_step: int = 1000
    # copy_thread: checkpoints, and bytes of values, per exported chunk.
    export_checkpoints: int = 150
    export_bytes: int = 1 << 20
    # delete_for_runs: run ids per call (a call's work grows with them; a Lua table of more
    # than ~8,000 cannot be unpacked).
    run_chunk: int = 4000
    # get_delta_channel_history: ancestors one script call visits at most: about 25 ms of
    # server time (measured by benchmarks/server_time.py; 10,000 took 135 ms). LangGraph
    # snapshots every delta channel at least every 5,000 supersteps
    # (DELTA_MAX_SUPERSTEPS_SINCE_SNAPSHOT), and at the default snapshot frequency far sooner,
    # so a walk takes one call, and at worst three; it goes on from the cursor the script
    # returns, so no single call keeps the server busy for long.
    history_budget: int = 2_000
    # bytes of bases kept decompressed for reads (see codec.Codec.base)
    read_bases: int = 8 << 20
    # a full channel value of this many bytes or more may become a base (see .compression)
    ref_min_size: int = REF_MIN_SIZE
