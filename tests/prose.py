"""Real English prose for the values of tests that compress, where filler would flatter
compression: the first 20 KB of the README as it was at commit db1bdda, when the README was
the reference (``tests/data/prose.txt``). The tests read the README itself before; it became a
short guide, too short for their slices, and the values a test stores (and so the reference
compression bases they lead to, which some tests name) must not move with the docs."""

from __future__ import annotations

from pathlib import Path

PROSE = (Path(__file__).resolve().parent / "data" / "prose.txt").read_text()
