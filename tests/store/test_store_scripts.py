"""The store's scripts (lua/store_*.lua) are fit for a cluster: each touches no key but its
KEYS, its KEYS are one namespace's seven keys (one hash tag: one slot), and its header's
``Counts:`` line (tests/script_headers.py) says what it takes. A script without flags may
touch an undeclared key of another slot when the node serves both (Redis 7 and Valkey run
it): nothing on the server would catch such a key; this does. The calls the store sends on
a cluster are checked against the headers in tests/cluster/test_cluster_store.py."""

from __future__ import annotations

import re

from redis.crc import key_slot

from langgraph.store.rediskv.base import STORE_SCRIPTS, store_script_sources
from langgraph.store.rediskv.keys import KEY_SUFFIXES, namespace_index_key, namespace_keys

from ..script_headers import Spec, header, header_counts, redis_calls

# the commands without a key the scripts may call
KEYLESS = {"TIME"}


def test_every_key_a_store_script_touches_is_one_of_its_keys() -> None:
    for name, source in store_script_sources().items():
        calls = redis_calls(source)
        # (every redis.call names its command literally: none escapes the parse)
        assert len(calls) == len(re.findall(r"redis\.p?call\(", source)), name
        assert calls, name
        for command, first in calls:
            if command in KEYLESS:
                assert first == "", (name, command)
            elif first in ("doc", "store_doc_key(key"):
                # the server vector search's documents (keys.py): the one kind of key not in
                # KEYS, in their slot, touched only for the items in KEYS[7] (d), which only a
                # store on the server's search (never a cluster's) writes
                assert command in ("DEL", "HSET"), (name, command)
            else:
                assert re.fullmatch(r"KEYS\[[1-7]\]", first), (name, command, first)
        # (nothing builds a key from another: no KEYS[i] .. "suffix")
        assert not re.search(r"KEYS\[\d\]\s*\.\.", source), name


def test_the_keys_of_a_namespace_share_one_slot_and_the_index_has_its_own() -> None:
    for namespace in [("a",), ("users", "u1", "memories"), ("x-y", "z"), ("{", "}")]:
        keys = namespace_keys("store", namespace)
        assert len(keys) == len(KEY_SUFFIXES) == 7
        assert len({key_slot(k.encode()) for k in keys}) == 1, keys
    assert namespace_index_key("store") == "store:store:ns"


def test_the_store_scripts_headers_count_what_they_describe() -> None:
    counts = header_counts(STORE_SCRIPTS)
    assert counts == {
        "store_put": (Spec(7, 0, 7), Spec(7, 0, 7)),
        "store_get": (Spec(7, 0, 7), Spec(3, 0, 4)),
        "store_page": (Spec(7, 0, 7), Spec(7, 0, 7)),
        "store_alive": (Spec(7, 0, 7), Spec(1, 0, 1)),
        "store_import": (Spec(7, 0, 7), Spec(10, 0, 10)),
    }
    for name, (keys, args) in counts.items():
        text = header(name)
        described = max(int(n) for n in re.findall(r"\bARGV\[(\d+)\]", text))
        assert described == args.most, name
        assert "KEYS[1..7]" in text or "KEYS[7]" in text, name
        assert keys.fixed == 7
