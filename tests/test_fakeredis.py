"""A fast unit layer without a server: the scripts and the core on fakeredis (with Lua).

It never replaces the real-server runs (every other test file); it gives a quick answer while
editing a script, e.g. `./scripts/test tests/test_fakeredis.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import fakeredis
from langgraph.checkpoint.conformance import checkpointer_test, validate

from langgraph.checkpoint.rediskv import RedisSaver

from .conftest import new_prefix
from .test_conformance import EXPECTED_TESTS
from .test_contract import cfg, chain


async def test_conformance_on_fakeredis() -> None:
    server = fakeredis.FakeServer()

    @checkpointer_test(name="RedisSaver on fakeredis")
    async def factory() -> AsyncIterator[RedisSaver]:
        yield RedisSaver(client=fakeredis.FakeRedis(server=server), prefix=new_prefix())

    report = await validate(factory)
    table = {name: (r.tests_passed, r.tests_failed) for name, r in report.results.items()}
    assert table == {name: (n, 0) for name, n in EXPECTED_TESTS.items()}


def test_list_filters_and_prune_on_fakeredis() -> None:
    saver = RedisSaver(client=fakeredis.FakeRedis(), prefix="unit")
    ids = chain(saver, "t", [{"user_id": "a", "step": i} for i in range(5)])
    chain(saver, "u", [{"user_id": "b", "step": 0}])
    assert [t.checkpoint["id"] for t in saver.list(None, filter={"user_id": "a"})] == ids[::-1]
    saver.prune(["t"], strategy="keep_latest")
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [ids[-1]]
    assert saver.check_invariants() == []
