"""The official Python SDK 1.x server of bench/bench_door.py and bench/bench_stream.py (JSON-RPC at ``/``).

Any message completes its task at once (bench_door: as the door's instant runner does), except
``tick N GAP`` (or ``hold N GAP SECS``): N artifact updates, GAP ms apart, each the wall-clock time
of its enqueue (``time.time_ns()``), then complete (after SECS for ``hold``; bench_stream). Run by
the SDK's own virtualenv (tests/a2a/sdk-env.sh); prints its port first.
"""

import asyncio
import socket
import time

import uvicorn
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, TaskState
from starlette.applications import Starlette


class Ticker(AgentExecutor):
    async def execute(self, context, event_queue):
        words = context.get_user_input().split()
        submitted = TaskState.TASK_STATE_SUBMITTED
        await event_queue.enqueue_event(
            new_task(context.task_id, context.context_id, submitted, history=[context.message])
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if not words or words[0] not in ("tick", "hold"):  # bench_door: complete at once
            await updater.complete()
            return
        n, gap = int(words[1]), float(words[2]) / 1000
        await updater.start_work()
        for i in range(n):
            stamp = f"{time.time_ns()}\n"
            await updater.add_artifact([Part(text=stamp)], artifact_id="response", append=i > 0, last_chunk=False)
            if gap:
                await asyncio.sleep(gap)
        if words[0] == "hold":
            await asyncio.sleep(float(words[3]))
        await updater.complete()

    async def cancel(self, context, event_queue):
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    interface = AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
    card = AgentCard(
        name="bench",
        description="bench",
        version="1",
        supported_interfaces=[interface],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="t", name="t", description="t", tags=["t"])],
    )
    handler = DefaultRequestHandler(agent_executor=Ticker(), task_store=InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=create_jsonrpc_routes(handler, "/"))
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", access_log=False))
    print(port, flush=True)
    await server.serve(sockets=[sock])


asyncio.run(main())
