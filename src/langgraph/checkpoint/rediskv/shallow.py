"""The official package's shallow savers, by their names: savers that keep only the newest
checkpoint of each thread and namespace (``keep_last=1``)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from .aio import AsyncRedisSaver
from .options import SaverSettings
from .sync import RedisSaver

Shallow = TypeVar("Shallow", bound="KeepsTheNewestOnly")


def _refuse_more(saver: str) -> TypeError:
    return TypeError(
        f"{saver} keeps the newest checkpoint only (keep_last=1); for more, use "
        "RedisSaver(keep_last=N)"
    )


class KeepsTheNewestOnly:
    """What makes a saver shallow, however it is made: ``keep_last=1``, and a TypeError for
    a ``keep_last`` of its own (mixed in before RedisSaver or AsyncRedisSaver)."""

    def __init__(self, url: Any = None, **kwargs: Any) -> None:
        if "keep_last" in kwargs:
            raise _refuse_more(type(self).__name__)
        super().__init__(url, **kwargs, keep_last=1)  # type: ignore[call-arg]

    @classmethod
    def from_settings(cls: type[Shallow], settings: SaverSettings, **kwargs: Any) -> Shallow:
        """As the saver's ``from_settings``, with ``keep_last=1``.

        Args:
            settings: the saver's options, checked (see options.py); keep_last unset or 1.
            **kwargs: ``client``, ``serde`` and redis-py's options, as for the constructor.

        Returns:
            The saver.

        Raises:
            TypeError: settings that keep more than the newest checkpoint.
            ValueError: settings without a URL and no client.
        """
        if settings.keep_last not in (0, 1):  # (0: the default, every checkpoint)
            raise _refuse_more(cls.__name__)
        shallow = dataclasses.replace(settings, keep_last=1)
        return super().from_settings(shallow, **kwargs)  # type: ignore[misc,no-any-return]


class ShallowRedisSaver(KeepsTheNewestOnly, RedisSaver):
    """``RedisSaver(keep_last=1)``: a thread's memory stays flat however long it runs. Takes
    the arguments of :class:`RedisSaver` but ``keep_last``."""


class AsyncShallowRedisSaver(KeepsTheNewestOnly, AsyncRedisSaver):
    """``AsyncRedisSaver(keep_last=1)``; see :class:`ShallowRedisSaver`."""
