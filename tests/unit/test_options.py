"""SaverSettings: every option checked once, with errors that name it; where an option comes
from (a keyword argument, then the environment, then the default)."""

from __future__ import annotations

import inspect
from datetime import timedelta

import pytest

from langgraph.checkpoint.rediskv import (
    AsyncRedisSaver,
    AsyncShallowRedisSaver,
    RedisSaver,
    ShallowRedisSaver,
)
from langgraph.checkpoint.rediskv.core import Limits
from langgraph.checkpoint.rediskv.errors import SettingsError
from langgraph.checkpoint.rediskv.options import SaverSettings
from langgraph.checkpoint.rediskv.settings import TTLSettings


def test_defaults() -> None:
    settings = SaverSettings.from_kwargs(client_given=True)
    assert settings == SaverSettings(
        url=None,
        cluster=False,
        prefix="lg",
        ttl=None,
        compression=1,
        keep_last=0,
        on_lost_checkpoint="raise",
        index_metadata=("run_id",),
        functions=True,
        wait_for_replicas=0,
        wait_timeout_ms=100,
        max_connections=64,
        pool_timeout=30.0,
        connect_timeout=5.0,
        socket_timeout=30.0,
        retries=3,
        slot_move_wait=30.0,
        auto_pipeline=True,
        limits=Limits(),
    )


def test_checked_forms() -> None:
    settings = SaverSettings.from_kwargs(
        "redis://h:1/2",
        ttl={"default_ttl": timedelta(seconds=90), "refresh_on_read": True},
        compression=False,
        keep_last=3,
        index_metadata=["a", "b", "a"],
        wait_for_replicas=2,
        wait_timeout=0.25,
        limits=Limits(list_page=2),
    )
    assert (settings.url, settings.ttl, settings.compression, settings.keep_last) == (
        "redis://h:1/2",
        TTLSettings(seconds=90, refresh_on_read=True),
        None,
        3,
    )
    assert settings.index_metadata == ("a", "b")
    assert (settings.wait_for_replicas, settings.wait_timeout_ms) == (2, 250)
    assert settings.limits.list_page == 2


def test_the_password_stays_out_of_the_repr() -> None:
    settings = SaverSettings.from_kwargs("redis://:secret@h:1/0")
    assert settings.url == "redis://:secret@h:1/0"
    assert "secret" not in repr(settings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"prefix": "a:b"},
            "invalid key prefix 'a:b': use 1-64 characters from A-Z a-z 0-9 _ . - "
            "(no ':', spaces, braces or glob characters, so that key patterns stay exact)",
        ),
        (
            {"keep_last": 0},
            "invalid keep_last 0: use None to keep every checkpoint, or the "
            "number of newest checkpoints to keep per thread and namespace (1 or more)",
        ),
        (
            {"on_lost_checkpoint": "ignore"},
            "invalid on_lost_checkpoint 'ignore': use 'raise' "
            "(CheckpointLostError, the default) or 'fall_back' (the newest checkpoint still "
            "complete, with a warning)",
        ),
        (
            {"compression": 23},
            "invalid compression 23: use True (zstd level 1), False to store "
            "values uncompressed, or a zstd level from 1 to 22",
        ),
        (
            {"index_metadata": "run_id"},
            "index_metadata must be a list of metadata keys, not 'run_id'",
        ),
        (
            {"wait_for_replicas": -1},
            "wait_for_replicas must be a number of replicas (an int, 0 for none), not -1",
        ),
        ({"ttl": {"default_ttl": -1}}, "invalid ttl: default_ttl must be positive, got -1"),
        (
            {"url": "http://h"},
            "unsupported Redis URL 'http://h': the scheme must be one of "
            "redis://, rediss://, unix://",
        ),
    ],
)
def test_errors_name_the_option(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        SaverSettings.from_kwargs(**kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_the_first_bad_option_is_named() -> None:
    """The order the constructors always checked in: replicas, index keys, prefix, ttl,
    compression, keep_last, on_lost_checkpoint, then the URL."""
    with pytest.raises(ValueError, match=r"^invalid key prefix 'a b'"):
        SaverSettings.from_kwargs("http://h", prefix="a b", keep_last=0)
    with pytest.raises(ValueError, match=r"^invalid keep_last 0:"):
        SaverSettings.from_kwargs("http://h", keep_last=0)


def test_the_url_from_kwargs_then_redis_url_then_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert SaverSettings.from_kwargs().url == "redis://localhost:6379/0"
    monkeypatch.setenv("REDIS_URL", "redis://env:1/0")
    assert SaverSettings.from_kwargs().url == "redis://env:1/0"
    assert SaverSettings.from_kwargs("redis://kw:2/0").url == "redis://kw:2/0"
    assert SaverSettings.from_kwargs(client_given=True).url is None


def test_from_env_precedence_kwargs_env_default() -> None:
    env = {
        "REDIS_URL": "redis://env:1/0",
        "REDISKV_PREFIX": "envp",
        "REDISKV_TTL_MINUTES": "2",
        "REDISKV_KEEP_LAST": "4",
    }
    settings = SaverSettings.from_env(env, prefix="kwp")
    assert settings.url == "redis://env:1/0"  # env
    assert settings.prefix == "kwp"  # kwargs over env
    assert settings.ttl == TTLSettings(seconds=120, refresh_on_read=False)  # env
    assert settings.keep_last == 4  # env
    assert settings.compression == 1  # default
    assert settings.index_metadata == ("run_id",)  # default
    assert SaverSettings.from_env({}).url == "redis://localhost:6379/0"
    assert SaverSettings.from_env({}, url="redis://kw:2/0").url == "redis://kw:2/0"


def test_from_env_names_the_variable() -> None:
    with pytest.raises(SettingsError) as caught:
        SaverSettings.from_env({"REDISKV_KEEP_LAST": "0"})
    assert str(caught.value) == (
        "REDISKV_KEEP_LAST='0' is invalid: use the number of newest checkpoints to keep per thread "
        "(1 or more), or leave it unset to keep all"
    )


def test_the_saver_keeps_its_settings() -> None:
    saver = RedisSaver("redis://127.0.0.1:1/0", prefix="p1", keep_last=2)
    try:
        assert saver.settings == SaverSettings.from_kwargs(
            "redis://127.0.0.1:1/0", prefix="p1", keep_last=2
        )
        made = RedisSaver.from_settings(saver.settings)
        assert (made.prefix, made.settings) == ("p1", saver.settings)
        made.close()
    finally:
        saver.close()


@pytest.mark.parametrize("saver", [RedisSaver, AsyncRedisSaver])
def test_from_kwargs_takes_the_constructors_options_with_their_defaults(saver: type) -> None:
    """from_kwargs mirrors the constructors' signature (the documented one): the same names
    and defaults, but the client, the serializer and redis-py's options, which are not
    settings; auto_pipeline is the async saver's only."""
    own = {
        name: p.default
        for name, p in inspect.signature(saver.__init__).parameters.items()
        if name not in ("self", "url", "client", "serde", "redis_kwargs")
    }
    mirrored = {
        name: p.default
        for name, p in inspect.signature(SaverSettings.from_kwargs).parameters.items()
        if name not in ("url", "client_given", "limits")
    }
    if saver is RedisSaver:
        mirrored.pop("auto_pipeline")
    assert own == mirrored


def test_a_ttl_argument_overrides_the_environments_refresh_flag() -> None:
    """REDISKV_TTL_REFRESH_ON_READ alone needs REDISKV_TTL_MINUTES, unless the ttl comes from
    an argument: the argument wins whole (it raised before)."""
    env = {"REDISKV_TTL_REFRESH_ON_READ": "true"}
    settings = SaverSettings.from_env(env, ttl={"default_ttl": 5, "refresh_on_read": False})
    assert settings.ttl == TTLSettings(seconds=300, refresh_on_read=False)
    assert SaverSettings.from_env(env, ttl=None).ttl is None
    with pytest.raises(SettingsError) as caught:
        SaverSettings.from_env(env)
    assert str(caught.value) == (
        "REDISKV_TTL_REFRESH_ON_READ='true' is invalid: it needs REDISKV_TTL_MINUTES "
        "(there is no expiry to refresh)"
    )


@pytest.mark.parametrize("saver", [RedisSaver, AsyncRedisSaver])
def test_settings_made_for_a_client_need_one(saver: type) -> None:
    """Settings made with client_given=True hold no URL: from_settings without a client
    raises instead of connecting to localhost (it did before)."""
    settings = SaverSettings.from_kwargs(client_given=True)
    with pytest.raises(ValueError) as caught:
        saver.from_settings(settings)
    assert str(caught.value) == (
        "these settings hold no URL (made with client_given=True): pass client=, or make "
        "them with a url"
    )


@pytest.mark.parametrize("saver", [ShallowRedisSaver, AsyncShallowRedisSaver])
def test_a_shallow_saver_from_settings_keeps_the_newest_only(saver: type) -> None:
    """from_settings of a shallow saver keeps one checkpoint, as its constructor does (it
    kept every one before), and refuses settings that ask for more."""
    made = saver.from_settings(SaverSettings.from_kwargs("redis://127.0.0.1:1/0"))
    assert made.settings.keep_last == 1
    assert made.settings == SaverSettings.from_kwargs("redis://127.0.0.1:1/0", keep_last=1)
    with pytest.raises(TypeError) as caught:
        saver.from_settings(SaverSettings.from_kwargs("redis://127.0.0.1:1/0", keep_last=3))
    assert str(caught.value) == (
        f"{saver.__name__} keeps the newest checkpoint only (keep_last=1); for more, use "
        "RedisSaver(keep_last=N)"
    )
