"""One error hierarchy: every error of the package derives from RediskvError, and still from
what it derived from before, so that existing ``except`` clauses keep catching it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import redis.exceptions

from langgraph.checkpoint.rediskv import errors
from langgraph.checkpoint.rediskv.cli.common import CliError
from langgraph.checkpoint.rediskv.core import ServerFullError as ServerFullFromCore
from langgraph.checkpoint.rediskv.demo import MissingExtraError
from langgraph.checkpoint.rediskv.eviction import CheckpointLostError
from langgraph.checkpoint.rediskv.replication import ReplicationError
from langgraph.checkpoint.rediskv.server import SettingsError
from langgraph.checkpoint.rediskv.storeformat import StoreFormatError

ROOT = Path(errors.__file__).parent


def test_every_error_keeps_its_former_base_under_one_root() -> None:
    former = {
        errors.SerializationError: TypeError,
        errors.ValueTooLargeError: ValueError,
        errors.ServerFullError: redis.exceptions.OutOfMemoryError,
        errors.ListingInterruptedError: RuntimeError,
        errors.CopyInterruptedError: RuntimeError,
        errors.StoreFormatError: RuntimeError,
        errors.CheckpointLostError: LookupError,
        errors.StoreItemLostError: LookupError,
        errors.ThreadLostError: errors.CheckpointLostError,
        errors.RedisUnavailableError: redis.exceptions.ConnectionError,
        errors.ReplicationError: errors.RedisUnavailableError,
        errors.SettingsError: ValueError,
        errors.CliError: Exception,
        errors.MissingExtraError: RuntimeError,
        errors.IncludeError: ValueError,
    }
    defined = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if cls.__module__ == errors.__name__ and cls is not errors.RediskvError
    }
    assert defined == set(former)
    assert [cls.__name__ for cls in former if not issubclass(cls, former[cls])] == []
    assert [cls.__name__ for cls in former if not issubclass(cls, errors.RediskvError)] == []


def test_errors_are_importable_from_where_they_were() -> None:
    assert (CliError, MissingExtraError, CheckpointLostError, ReplicationError) == (
        errors.CliError,
        errors.MissingExtraError,
        errors.CheckpointLostError,
        errors.ReplicationError,
    )
    assert (SettingsError, StoreFormatError, ServerFullFromCore) == (
        errors.SettingsError,
        errors.StoreFormatError,
        errors.ServerFullError,
    )
    lost = CheckpointLostError("t", "root", "P:th:{t}")
    assert (lost.thread_id, lost.what, lost.key) == ("t", "root", "P:th:{t}")
    assert str(SettingsError("REDISKV_TTL", "x", "a number")) == (
        "REDISKV_TTL='x' is invalid: a number"
    )


def test_no_error_class_is_defined_outside_errors_py() -> None:
    elsewhere = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "errors.py" and path.parent == ROOT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and (
                node.name.endswith("Error")
                or any(ast.unparse(b).endswith(("Error", "Exception")) for b in node.bases)
            ):
                elsewhere.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert elsewhere == []
