"""The official Python SDK 1.x server for bench/bench_door.py: SendMessage at ``/``, each task completed at once.

Run by the SDK's own virtualenv (tests/a2a/sdk-env.sh); prints its port on the first line.
"""

import asyncio
import socket

import uvicorn
from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from starlette.applications import Starlette


class Instant(AgentExecutor):  # completes each task at once, as the door's instant runner does
    async def execute(self, context, event_queue):
        task = new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
        await event_queue.enqueue_event(task)
        await TaskUpdater(event_queue, context.task_id, context.context_id).complete()

    async def cancel(self, context, event_queue):
        pass


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    card = AgentCard(
        name="bench",
        description="bench",
        version="1",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="t", name="t", description="t", tags=["t"])],
    )
    handler = DefaultRequestHandler(agent_executor=Instant(), task_store=InMemoryTaskStore(), agent_card=card)
    server = uvicorn.Server(
        uvicorn.Config(Starlette(routes=create_jsonrpc_routes(handler, "/")), log_level="error", access_log=False)
    )
    print(port, flush=True)
    await server.serve(sockets=[sock])


asyncio.run(main())
