"""The official package's shallow savers, by their names: savers that keep only the newest
checkpoint of each thread and namespace (``keep_last=1``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .aio import AsyncRedisSaver
from .options import SaverSettings
from .sync import RedisSaver


def _refuse_more(saver: str) -> TypeError:
    return TypeError(
        f"{saver} keeps the newest checkpoint only (keep_last=1); for more, use "
        "RedisSaver(keep_last=N)"
    )


def _shallow(saver: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    if "keep_last" in kwargs:
        raise _refuse_more(saver)
    return {**kwargs, "keep_last": 1}


def _shallow_settings(saver: str, settings: SaverSettings) -> SaverSettings:
    """The settings with keep_last=1 (settings that keep none, the default, or one)."""
    if settings.keep_last not in (0, 1):
        raise _refuse_more(saver)
    return dataclasses.replace(settings, keep_last=1)


class ShallowRedisSaver(RedisSaver):
    """``RedisSaver(keep_last=1)``: a thread's memory stays flat however long it runs. Takes
    the arguments of :class:`RedisSaver` but ``keep_last``."""

    def __init__(self, url: Any = None, **kwargs: Any) -> None:
        super().__init__(url, **_shallow(type(self).__name__, kwargs))

    @classmethod
    def from_settings(cls, settings: SaverSettings, **kwargs: Any) -> ShallowRedisSaver:
        """As :meth:`RedisSaver.from_settings`, with ``keep_last=1``.

        Args:
            settings: the saver's options, checked (see options.py); keep_last unset or 1.
            **kwargs: ``client``, ``serde`` and redis-py's options, as for the constructor.

        Returns:
            The saver.

        Raises:
            TypeError: settings that keep more than the newest checkpoint.
            ValueError: settings without a URL and no client.
        """
        return super().from_settings(_shallow_settings(cls.__name__, settings), **kwargs)


class AsyncShallowRedisSaver(AsyncRedisSaver):
    """``AsyncRedisSaver(keep_last=1)``; see :class:`ShallowRedisSaver`."""

    def __init__(self, url: Any = None, **kwargs: Any) -> None:
        super().__init__(url, **_shallow(type(self).__name__, kwargs))

    @classmethod
    def from_settings(cls, settings: SaverSettings, **kwargs: Any) -> AsyncShallowRedisSaver:
        """As :meth:`AsyncRedisSaver.from_settings`, with ``keep_last=1``.

        Args:
            settings: the saver's options, checked (see options.py); keep_last unset or 1.
            **kwargs: ``client``, ``serde`` and redis-py's options, as for the constructor.

        Returns:
            The saver.

        Raises:
            TypeError: settings that keep more than the newest checkpoint.
            ValueError: settings without a URL and no client.
        """
        return super().from_settings(_shallow_settings(cls.__name__, settings), **kwargs)
