"""What the sync and the async store share: arguments, scripts, the driving of the core."""

from __future__ import annotations

import functools
import os
from typing import Any

from langgraph.store.base import TTLConfig

from langgraph.checkpoint.rediskv.base import refuse_decoding_client
from langgraph.checkpoint.rediskv.scripts import assemble, lua_dir

from .rounds import StoreConfig

STORE_SCRIPTS = ("store_put", "store_get", "store_page", "store_alive", "store_import")


@functools.cache
def store_script_sources() -> dict[str, str]:
    """The store's scripts (``lua/store_*.lua``), includes inlined, by name."""
    folder = lua_dir()
    return {
        name: assemble((folder / f"{name}.lua").read_text(), folder, f"{name}.lua")
        for name in STORE_SCRIPTS
    }


def store_config(prefix: str, ttl: TTLConfig | None) -> StoreConfig:
    if not prefix or ":" in prefix or "{" in prefix or "}" in prefix:
        raise ValueError(f"prefix must be non-empty, without ':', '{{' or '}}': {prefix!r}")
    if ttl is not None:
        unknown = set(ttl) - {"default_ttl", "refresh_on_read", "sweep_interval_minutes"}
        if unknown:
            raise ValueError(f"unknown ttl settings: {sorted(unknown)}")
        for name in ("default_ttl", "sweep_interval_minutes"):
            minutes = ttl.get(name)
            if minutes is not None and (
                isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes <= 0
            ):
                raise ValueError(
                    f"ttl {name!r} must be a positive number of minutes, not {minutes!r}"
                )
        refresh = ttl.get("refresh_on_read")
        if refresh is not None and not isinstance(refresh, bool):
            raise ValueError(f"ttl 'refresh_on_read' must be true or false, not {refresh!r}")
    return StoreConfig(prefix=prefix, ttl=ttl)


def default_url(url: str | None) -> str:
    return url or os.environ.get("REDIS_URL") or "redis://localhost:6379/0"


def refuse_vector_decoding_client(client: Any) -> None:
    """The vectors are bytes: a client that decodes replies into text cannot read them."""
    refuse_decoding_client(
        client,
        "the store's vectors (index=) are bytes: give the store a client without decode_responses",
    )


def reply_value(value: Any) -> Any:
    return value
