// The official JS SDK server of bench/bench_door.py and bench/bench_stream.py (JSON-RPC at /).
// Any message completes its task at once, except `tick N GAP` (or `hold N GAP SECS`): N artifact
// updates, GAP ms apart, each the wall-clock time of its publication in ns, then complete.
// Copied beside tests/a2a/js/node_modules to run; prints its port first.
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskState } from '@a2a-js/sdk';

const text = (t) => ({ content: { $case: 'text', value: t } });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6)).toString();
const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  const card = {
    name: 'bench', description: 'bench', version: '1',
    supportedInterfaces: [{ url: `http://127.0.0.1:${port}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [],
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 't', name: 't', description: 't', tags: ['t'], examples: [], inputModes: [], outputModes: [],
      securityRequirements: [] }],
    signatures: [],
  };
  const executor = {
    async execute(ctx, bus) {
      const words = ctx.userMessage.parts.map((p) => p.content?.value ?? '').join('').split(/\s+/);
      const n = Number(words[1]); const gap = Number(words[2]);
      const status = (state) => ({ state, message: undefined, timestamp: new Date().toISOString() });
      if (words[0] !== 'tick' && words[0] !== 'hold') {
        bus.publish({ kind: 'task', data: { id: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_COMPLETED),
          artifacts: [], history: [ctx.userMessage], metadata: undefined } });
        bus.finished();
        return;
      }
      bus.publish({ kind: 'task', data: { id: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_WORKING),
        artifacts: [], history: [ctx.userMessage], metadata: undefined } });
      for (let i = 0; i < n; i++) {
        bus.publish({ kind: 'artifactUpdate', data: { taskId: ctx.taskId, contextId: ctx.contextId,
          artifact: { artifactId: 'response', name: 'response', description: '', parts: [text(`${nowNs()}\n`)], metadata: undefined,
            extensions: [] }, append: i > 0, lastChunk: false, metadata: undefined } });
        if (gap) await sleep(gap);
      }
      if (words[0] === 'hold') await sleep(Number(words[3]) * 1000);
      bus.publish({ kind: 'statusUpdate', data: { taskId: ctx.taskId, contextId: ctx.contextId,
        status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined } });
      bus.finished();
    },
    async cancelTask(_taskId, bus) { bus.finished(); },
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use(express.json());
  app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(port);
});
