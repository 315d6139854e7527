// The official A2A JS SDK's client against a door: node client.mjs <door url> <1.0|0.3> [webhook url]
// Prints one JSON line with what it saw; tests/a2a/test_js_interop.py asserts on it.
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const [url, dialect, hook] = process.argv.slice(2);
const text = (t) => ({ content: { $case: 'text', value: t } });
const message = (id, body, extra = {}) => ({
  messageId: id, contextId: '', taskId: '', role: Role.ROLE_USER, parts: [text(body)],
  metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
});
const config = (immediate) => ({
  acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: immediate,
});
const send = (client, msg, immediate) => client.sendMessage({ tenant: '', message: msg, configuration: config(immediate), metadata: undefined });
const stateName = (s) => TaskState[s];
const textOf = (parts) => (parts ?? []).map((p) => p.content?.value).join('');

// With the compatibility layer on, a 0.3 interface gets the SDK's v0.3 JSON-RPC transport.
const factory = new ClientFactory({
  ...ClientFactoryOptions.default,
  transports: [new JsonRpcTransportFactory({ legacyCompat: { enabled: true } })],
});
let client;
if (dialect === '0.3') {
  const card = await (await fetch(new URL('/.well-known/agent-card.json', url))).json();
  card.supportedInterfaces = card.supportedInterfaces.filter((i) => i.protocolVersion.startsWith('0.3'));
  client = await factory.createFromAgentCard(card);
} else {
  client = await factory.createFromUrl(url);
}
const out = {};
if (hook) {
  // Streaming, subscribing and push notifications (the door streams; its card says so).
  const shown = (ev) => {
    const p = ev.payload;
    if (p?.$case === 'task') return ['task', stateName(p.value.status.state)];
    if (p?.$case === 'statusUpdate') return ['status', stateName(p.value.status.state)];
    if (p?.$case === 'artifactUpdate') return ['artifact', textOf(p.value.artifact.parts), p.value.append, p.value.lastChunk];
    return [p?.$case];
  };
  out.stream = [];
  for await (const ev of client.sendMessageStream({ tenant: '', message: message('js-s1', 'one two three'), configuration: config(false), metadata: undefined })) {
    out.stream.push(shown(ev));
  }
  const slow = await send(client, message('js-s2', 'slow a b c'), true);
  await client.createTaskPushNotificationConfig({ tenant: '', id: 'hook', taskId: slow.id, url: hook, token: 'js-token', authentication: undefined });
  out.subscribe = [];
  for await (const ev of client.resubscribeTask({ tenant: '', id: slow.id })) {
    out.subscribe.push(shown(ev));
  }
  if (dialect === '1.0') out.unfiltered = (await client.listTasks({})).tasks.length;  // status UNRECOGNIZED
  console.log(JSON.stringify(out));
  process.exit(0);
}
const blocked = await send(client, message('js-1', 'hello from js'), false);
out.blocking = { id: blocked.id, state: stateName(blocked.status.state), artifact: textOf(blocked.artifacts?.[0]?.parts) };
const quick = await send(client, message('js-2', 'hold'), true);
out.immediate = { state: stateName(quick.status.state) };
const canceled = await client.cancelTask({ tenant: '', id: quick.id, metadata: undefined });
out.canceled = stateName(canceled.status.state);
const asked = await send(client, message('js-3', 'ask:your name?'), false);
out.asked = { state: stateName(asked.status.state), question: textOf(asked.status.message?.parts) };
const answered = await send(client, message('js-4', 'Ada', { taskId: asked.id, contextId: asked.contextId }), false);
out.answered = { same: answered.id === asked.id, state: stateName(answered.status.state), artifact: textOf(answered.artifacts?.[0]?.parts) };
const got = await client.getTask({ tenant: '', id: asked.id, historyLength: 10 });
out.history = got.history.map((m) => textOf(m.parts));
if (dialect === '1.0') {
  const listed = await client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 2, pageToken: '', historyLength: 0, includeArtifacts: false });
  const rest = await client.listTasks({ tenant: '', contextId: '', status: 0, pageSize: 2, pageToken: listed.nextPageToken, historyLength: 0, includeArtifacts: false });
  out.list = { first: listed.tasks.length, total: listed.totalSize, next: listed.nextPageToken !== '', rest: rest.tasks.length, last: rest.nextPageToken };
}
try {
  await client.getTask({ tenant: '', id: 'tsk_nope', historyLength: undefined });
  out.notFound = 'no error';
} catch (err) {
  out.notFound = err?.constructor?.name ?? String(err);
}
console.log(JSON.stringify(out));
