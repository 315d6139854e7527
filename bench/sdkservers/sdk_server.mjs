// The official JS SDK server for bench/bench_door.py: SendMessage at /, each task completed at once.
// Copied beside tests/a2a/js/node_modules to run; prints its port on the first line.
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskState } from '@a2a-js/sdk';

const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  const card = {
    name: 'bench', description: 'bench', version: '1',
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 't', name: 't', description: 't', tags: ['t'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
  const executor = {  // completes each task at once, as the door's instant runner does
    async execute(ctx, bus) {
      bus.publish({ kind: 'task', data: { id: ctx.taskId, contextId: ctx.contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() },
        artifacts: [], history: [ctx.userMessage], metadata: undefined } });
      bus.finished();
    },
    async cancelTask(_taskId, bus) { bus.finished(); },
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use(express.json());
  app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(port);
});
