"""The official langgraph-checkpoint-conformance suite, against the server under test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from langgraph.checkpoint.rediskv import AsyncRedisSaver, RedisSaver

from ..conftest import new_prefix

# tests per capability in langgraph-checkpoint-conformance 0.0.2 (81 in all)
EXPECTED_TESTS = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


@pytest.mark.parametrize("saver_class", [AsyncRedisSaver, RedisSaver])
async def test_conformance_all_capabilities(
    saver_class: type[AsyncRedisSaver] | type[RedisSaver],
    server_url: str,
    saver_options: dict[str, Any],
) -> None:
    @checkpointer_test(name=saver_class.__name__)
    async def factory() -> AsyncIterator[AsyncRedisSaver | RedisSaver]:
        saver = saver_class(server_url, prefix=new_prefix(), **saver_options)
        try:
            yield saver
        finally:
            if isinstance(saver, AsyncRedisSaver):
                await saver.aclose()
            else:
                saver.close()

    report = await validate(factory)
    table = {
        name: (result.tests_passed, result.tests_failed, result.failures)
        for name, result in report.results.items()
    }
    print(f"\nconformance {saver_class.__name__}:")
    for name, (passed, failed, _) in table.items():
        print(f"  {name:<16} {passed:>3} passed {failed:>3} failed")
    assert {c.value for c in ALL_CAPABILITIES} == set(table)
    assert table == {name: (n, 0, []) for name, n in EXPECTED_TESTS.items()}
    assert sum(EXPECTED_TESTS.values()) == 81
