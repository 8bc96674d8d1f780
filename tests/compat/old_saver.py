"""Drives a saver of the release found first on the path (the previous release, installed
in a private directory that PYTHONPATH names): ``python -m tests.compat.old_saver URL PREFIX
OPTIONS_JSON``. Reads one JSON request a line from stdin, answers one JSON line on stdout:
{"ok": <base64 pickle of the result>} or {"error": <traceback>}."""

from __future__ import annotations

import base64
import json
import pickle
import sys
import traceback
from typing import Any

import langgraph.checkpoint.rediskv as package
from langgraph.checkpoint.rediskv import RedisSaver

from .scenario import Runner, checkpoints


def main() -> None:
    url, prefix, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    with RedisSaver(url, prefix=prefix, **options) as saver:
        runner = Runner(saver)
        calls: dict[str, Any] = {
            "where": lambda: package.__file__,
            "turn": runner.turn,
            "read": runner.read,
            "checkpoints": lambda thread: checkpoints(saver, thread),
            "get_tuple": lambda thread: saver.get_tuple({"configurable": {"thread_id": thread}}),
            "delete_thread": saver.delete_thread,
            "delete_for_runs": saver.delete_for_runs,
            "prune": saver.prune,
            "copy_thread": saver.copy_thread,
            "set_thread_ttl": saver.set_thread_ttl,
            "unpin_thread": saver.unpin_thread,
            "check_invariants": lambda: [str(p) for p in saver.check_invariants()],
        }
        for line in sys.stdin:
            request = json.loads(line)
            try:
                result = calls[request["call"]](*request["args"])
                reply = {"ok": base64.b64encode(pickle.dumps(result)).decode()}
            except Exception:
                reply = {"error": traceback.format_exc()}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
