"""The store's shape, as test_layering.py checks the saver's: its modules import each other one
way, ``core.py`` (``run_batch``) sits above the parts it was split into (none imports it), and
no module takes a sibling's private names. Read from the source with ``ast``."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_layering import find_cycle, imports_of

STORE = "langgraph.store.rediskv"
ROOT = Path(__file__).resolve().parents[2] / "src" / "langgraph" / "store" / "rediskv"
# the drivers of run_batch: the only modules that import core
CORE_DRIVERS = {STORE}


def store_modules() -> dict[str, Path]:
    return {
        STORE if p.stem == "__init__" else f"{STORE}.{p.stem}": p for p in sorted(ROOT.glob("*.py"))
    }


def store_imports() -> dict[str, list[tuple[str, str]]]:
    modules = store_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def test_the_store_imports_one_way() -> None:
    imports = store_imports()
    graph = {
        name: {t for t, _ in found if t in imports and t != name} for name, found in imports.items()
    }
    assert find_cycle(graph) is None
    assert {name for name, targets in graph.items() if f"{STORE}.core" in targets} == CORE_DRIVERS
    # core hands each search and listing to its module
    operations = {f"{STORE}.{m}" for m in ("search", "semantic", "listing")}
    assert operations <= graph[f"{STORE}.core"]


def test_no_store_module_takes_another_modules_private_names() -> None:
    wrong = [
        f"{name} imports {taken} from {target}"
        for name, found in store_imports().items()
        for target, taken in found
        if taken.startswith("_") and not taken.startswith("__") and target.startswith(STORE)
    ]
    assert wrong == []
