"""What a migration did: one :class:`ThreadReport` per thread, gathered in a
:class:`MigrationReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["copied", "present", "conflict", "to copy", "failed", "incomplete"]


@dataclass
class ThreadReport:
    """What happened to one thread. ``status``: "copied" (written now), "present" (every
    checkpoint was in the target already), "to copy" (a dry run), "conflict" (the target
    has checkpoints the source lacks; left alone), "failed" (an error; see ``problems``),
    "incomplete" (copied, but the target rebuilds a delta channel from other history than the
    source: see ``problems``). ``carried``: checkpoints the source keeps without listing them,
    copied because delta channels are rebuilt from them (counted in ``namespaces``)."""

    thread_id: str
    status: Status
    namespaces: dict[str, int] = field(default_factory=dict)  # ns -> checkpoints
    writes: int = 0  # pending writes in the source
    carried: int = 0
    verified: bool | None = None  # None: not verified
    problems: list[str] = field(default_factory=list)

    @property
    def checkpoints(self) -> int:
        return sum(self.namespaces.values())


@dataclass
class MigrationReport:
    source: str
    dry_run: bool
    threads: list[ThreadReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(t.status not in ("conflict", "failed", "incomplete") and t.verified is not False
                   for t in self.threads)  # fmt: skip

    def count(self, status: Status) -> int:
        return sum(1 for t in self.threads if t.status == status)

    @property
    def checkpoints(self) -> int:
        return sum(t.checkpoints for t in self.threads)

    @property
    def writes(self) -> int:
        return sum(t.writes for t in self.threads)

    @property
    def verified(self) -> int:
        return sum(1 for t in self.threads if t.verified)

    def problems(self) -> list[str]:
        return [f"thread {t.thread_id!r}: {p}" for t in self.threads for p in t.problems]
