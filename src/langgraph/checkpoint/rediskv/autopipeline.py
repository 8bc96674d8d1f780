"""Auto-pipelining for the asyncio transport.

Concurrent graphs call the saver at the same moments (every superstep ends with a put and
some put_writes). While a few sends are in flight, further script calls wait and then go out
together as one pipeline, one packed send, instead of one send and one reply each: the client
spends less CPU per call, which is what bounds a busy chat backend. Each call still gets its
own reply or error, and a call made while the line is quiet goes out at once, alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aredis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from .core import ScriptCall
from .functions import FunctionLibrary

Pending = tuple[ScriptCall, "asyncio.Future[Any]"]


# Sends in flight at once before calls start to queue up for the next pipeline.
MAX_IN_FLIGHT = 2


class AutoPipeline:
    def __init__(
        self,
        client: aredis.Redis,
        scripts: dict[str, AsyncScript],
        library: FunctionLibrary,
        run_alone: Callable[[ScriptCall], Awaitable[Any]],
    ) -> None:
        self._client = client
        self._scripts = scripts
        self._library = library
        self._run_alone = run_alone  # one call as the saver sends it (FCALL or EVALSHA)
        self._queue: list[Pending] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()  # strong references to queued sends

    async def call(self, call: ScriptCall, large: bool) -> Any:
        """``call``'s reply. ``large``: an argument of it is over MIN_BULK_LIMIT (the caller
        has looked: largest_arg)."""
        if large:
            # a very large value goes alone: should the server refuse it, it drops the
            # connection, which must not fail the calls of other graphs
            return await self._run_alone(call)
        if self._in_flight < MAX_IN_FLIGHT:  # a quiet line: straight out
            self._in_flight += 1
            try:
                return await self._run_alone(call)
            finally:
                self._in_flight -= 1
                self._send_queued()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((call, future))
        return await future

    def _send_queued(self) -> None:
        """Send everything that queued up while the line was busy, as one pipeline."""
        if not self._queue or self._in_flight >= MAX_IN_FLIGHT:
            return
        batch, self._queue = self._queue, []
        self._in_flight += 1
        task = asyncio.ensure_future(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._in_flight -= 1
        self._send_queued()

    async def _send(self, batch: list[Pending]) -> None:
        try:
            if len(batch) == 1:
                call = batch[0][0]
                results: list[Any] = [await self._run_alone(call)]
            else:
                pipe = self._client.pipeline(transaction=False)
                as_functions = [self._library.ready(call) for call, _ in batch]
                for (call, _), as_function in zip(batch, as_functions, strict=True):
                    if as_function:
                        pipe.execute_command("FCALL", *self._library.fcall_args(call))
                    else:
                        script = self._scripts[call.name]
                        pipe.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
                results = await pipe.execute(raise_on_error=False)
                for i, (call, _) in enumerate(batch):
                    result = results[i]
                    if isinstance(result, NoScriptError) or (
                        as_functions[i]
                        and isinstance(result, ResponseError)
                        and self._library.call_failed(result)
                    ):
                        # not loaded yet, or flushed (or functions not allowed): sent alone,
                        # it loads what it needs. Its error is its own: the other calls of
                        # the batch have their replies (and may have written).
                        try:
                            results[i] = await self._run_alone(call)
                        except Exception as exc:
                            results[i] = exc
        except BaseException as exc:  # the whole send failed: every caller learns why
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
