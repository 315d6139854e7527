// The official A2A JS SDK's express server as a peer: node server.mjs <1.0|0.3>
// JSON-RPC is served at /a2a/jsonrpc (not the root); the card lists a 1.0 interface, or with
// 0.3 only a 0.3 interface (the SDK's compatibility layer on). Prints the port, then one JSON
// line per JSON-RPC request it received: {path, version, method}.
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { TaskState, Role } from '@a2a-js/sdk';

const mode = process.argv[2] ?? '1.0';
const text = (t) => ({ content: { $case: 'text', value: t } });
const app = express();
const server = app.listen(0, '127.0.0.1', () => {
  const port = server.address().port;
  const base = `http://127.0.0.1:${port}/a2a/jsonrpc`;
  const card = {
    name: 'js-echo', description: 'The A2A JS SDK echoing its input', version: '1.0.0',
    supportedInterfaces: [{ url: base, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: mode }],
    provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'echo', name: 'echo', description: 'echo', tags: ['echo'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
  const executor = {
    async execute(ctx, bus) {
      const input = ctx.userMessage.parts.map((p) => p.content?.value ?? '').join('');
      const reply = { messageId: `${ctx.taskId}-reply`, contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT,
        parts: [text(`echo: ${input}`)], metadata: undefined, extensions: [], referenceTaskIds: [] };
      bus.publish({ kind: 'task', data: {
        id: ctx.taskId, contextId: ctx.contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, message: reply, timestamp: new Date().toISOString() },
        artifacts: [{ artifactId: 'response', name: 'response', description: '', parts: [text(`echo: ${input}`)], metadata: undefined, extensions: [] }],
        history: [ctx.userMessage], metadata: undefined,
      } });
      bus.finished();
    },
    async cancelTask(_taskId, bus) { bus.finished(); },
  };
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  app.use(express.json());
  app.use((req, _res, next) => {
    if (req.method === 'POST') {
      console.log(JSON.stringify({ path: req.path, version: req.get('A2A-Version') ?? null, method: req.body?.method ?? null }));
    }
    next();
  });
  app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
  app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: mode === '0.3' } }));
  console.log(port);
});
