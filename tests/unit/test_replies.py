"""Reply words (REAPING, BUILDING, INDEX, NAMESPACES, LOST) are named constants on both sides:
lua/include/replies.lua and replies.py define the same words with the same values, and no
script or include writes one as a string literal."""

from __future__ import annotations

import re

from langgraph.checkpoint.rediskv import replies
from langgraph.checkpoint.rediskv.scripts import lua_dir, script_sources

_CONSTANT = re.compile(r'^local ([A-Z_]+) = "([^"]*)"$', re.MULTILINE)


def _lua_words() -> dict[str, str]:
    return dict(_CONSTANT.findall((lua_dir() / "include" / "replies.lua").read_text()))


def test_lua_and_python_define_the_same_reply_words() -> None:
    assert _lua_words() == {
        "REAPING": "REAPING",
        "BUILDING": "BUILDING",
        "INDEX": "INDEX",
        "NAMESPACES": "NAMESPACES",
        "LOST": "LOST",
    }
    assert {name: value.decode() for name, value in replies.REPLY_WORDS.items()} == _lua_words()
    python_constants = {
        name: getattr(replies, name) for name in dir(replies) if re.fullmatch(r"[A-Z_]+", name)
    }
    assert python_constants == {**replies.REPLY_WORDS, "REPLY_WORDS": replies.REPLY_WORDS}


def _string_literals(text: str) -> list[str]:
    code = re.sub(r"--\[\[.*?\]\]|--[^\n]*", "", text, flags=re.DOTALL)
    return [
        double or single
        for double, single in re.findall(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'', code)
    ]


def test_no_script_writes_a_reply_word_as_a_literal() -> None:
    words = set(_lua_words().values())
    files = [path for path in lua_dir().glob("*.lua")]
    files += [path for path in (lua_dir() / "include").glob("*.lua") if path.stem != "replies"]
    assert len(files) == 53
    for path in files:
        for literal in _string_literals(path.read_text()):
            first_word = literal.split(" ", 1)[0]
            assert first_word not in words, (path.name, literal)


def test_the_scripts_that_reply_a_word_hold_its_constant() -> None:
    sources = script_sources()
    for name, word in [
        ("put_checkpoint", "REAPING"),
        ("put_writes", "REAPING"),
        ("list_indexed", "BUILDING"),
        ("list_thread_candidates", "BUILDING"),
        ("run_threads", "BUILDING"),
        ("list_checkpoints", "NAMESPACES"),
        ("put_checkpoint", "INDEX"),
        ("reindex_thread", "INDEX"),
        ("import_thread", "INDEX"),
        ("get_tuple", "LOST"),
    ]:
        assert f'local {word} = "{word}"' in sources[name], name
