"""The official package's shallow savers, by their names: savers that keep only the newest
checkpoint of each thread and namespace (``keep_last=1``)."""

from __future__ import annotations

from typing import Any

from .aio import AsyncRedisSaver
from .sync import RedisSaver


def _shallow(saver: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if "keep_last" in kwargs:
        raise TypeError(
            f"{saver} keeps the newest checkpoint only (keep_last=1); for more, use "
            "RedisSaver(keep_last=N)"
        )
    return {**kwargs, "keep_last": 1}


class ShallowRedisSaver(RedisSaver):
    """``RedisSaver(keep_last=1)``: a thread's memory stays flat however long it runs. Takes
    the arguments of :class:`RedisSaver` but ``keep_last``."""

    def __init__(self, url: Any = None, **kwargs: Any) -> None:
        super().__init__(url, **_shallow(type(self).__name__, kwargs))


class AsyncShallowRedisSaver(AsyncRedisSaver):
    """``AsyncRedisSaver(keep_last=1)``; see :class:`ShallowRedisSaver`."""

    def __init__(self, url: Any = None, **kwargs: Any) -> None:
        super().__init__(url, **_shallow(type(self).__name__, kwargs))
