"""A fast unit layer without a server: the scripts and the core on fakeredis (with Lua).

It never replaces the real-server runs (every other test file); it gives a quick answer while
editing a script, e.g. `./scripts/test tests/unit/test_fakeredis.py`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import fakeredis
from langgraph.checkpoint.conformance import checkpointer_test, validate

from langgraph.checkpoint.rediskv import RedisSaver

from ..conftest import new_prefix
from ..integration.test_conformance import EXPECTED_TESTS
from ..integration.test_contract import cfg, chain


class FlaglessFakeRedis(fakeredis.FakeRedis):
    """fakeredis runs Lua but knows no Redis 7 script flags (a `#!lua` first line is a syntax
    error there): register the scripts without it. Only the OOM and cross-slot checks that the
    flags ask for are lost, and fakeredis has neither."""

    def register_script(self, script):  # type: ignore[no-untyped-def]
        if isinstance(script, str) and script.startswith("#!"):
            script = "--" + script  # same line count, so error line numbers stay right
        return super().register_script(script)


async def test_conformance_on_fakeredis() -> None:
    server = fakeredis.FakeServer()

    @checkpointer_test(name="RedisSaver on fakeredis")
    async def factory() -> AsyncIterator[RedisSaver]:
        yield RedisSaver(client=FlaglessFakeRedis(server=server), prefix=new_prefix())

    report = await validate(factory)
    table = {name: (r.tests_passed, r.tests_failed) for name, r in report.results.items()}
    assert table == {name: (n, 0) for name, n in EXPECTED_TESTS.items()}


def test_list_filters_and_prune_on_fakeredis() -> None:
    saver = RedisSaver(client=FlaglessFakeRedis(), prefix="unit")
    ids = chain(saver, "t", [{"user_id": "a", "step": i} for i in range(5)])
    chain(saver, "u", [{"user_id": "b", "step": 0}])
    assert [t.checkpoint["id"] for t in saver.list(None, filter={"user_id": "a"})] == ids[::-1]
    saver.prune(["t"], strategy="keep_latest")
    assert [t.checkpoint["id"] for t in saver.list(cfg("t"))] == [ids[-1]]
    assert saver.check_invariants() == []
