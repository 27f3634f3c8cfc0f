// An editor on the official ACP TypeScript SDK reaching `raven acp --listen` through the
// SDK's own Streamable HTTP or WebSocket client transport (a second, independent client
// implementation of the transport RFD). Arguments: http|ws, the URL, the token, the
// session's folder and a file the cancelled prompt's command writes its pid to.
//
// It initializes, starts a session, sends a prompt whose permission it allows once,
// sends a prompt it cancels once that command runs, lists and closes the session, then
// loads it on a second connection; it prints what it saw as one JSON object.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import WebSocket from "ws";

const [binding, url, token, cwd, pidfile] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const seen = { permissions: [], texts: {}, kinds: [] };

function connect() {
  const stream =
    binding === "http"
      ? createHttpStream(url, { headers })
      : createWebSocketStream(url, { headers, WebSocket });
  const app = acp
    .client({ name: "ts-remote-editor" })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      seen.permissions.push(params.toolCall.title);
      const allow = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      const update = params.update;
      seen.kinds.push(update.sessionUpdate);
      if (update.sessionUpdate.endsWith("_message_chunk") && update.content.type === "text") {
        const key = `${update.sessionUpdate}`;
        seen.texts[key] = (seen.texts[key] ?? "") + update.content.text;
      }
    });
  return app.connect(stream);
}

async function until(done, what) {
  const deadline = Date.now() + 30_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

const first = connect();
const agent = first.agent;
const init = await agent.request(acp.methods.agent.initialize, {
  protocolVersion: 1,
  clientCapabilities: {},
});
const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
const said = (text) => [{ type: "text", text }];
const written = await agent.request(acp.methods.agent.session.prompt, {
  sessionId,
  prompt: said("write it"),
});
const running = agent.request(acp.methods.agent.session.prompt, {
  sessionId,
  prompt: said("sleep"),
});
await until(() => existsSync(pidfile), "the command to run");
await agent.notify(acp.methods.agent.session.cancel, { sessionId });
const cancelled = await running;
const listed = await agent.request(acp.methods.agent.session.list, {});
await agent.request(acp.methods.agent.session.close, { sessionId });
const answered = seen.texts.agent_message_chunk;
first.close();
await first.closed;

seen.texts = {};
const second = connect();
await second.agent.request(acp.methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
await second.agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
second.close();
await second.closed;

process.stdout.write(
  JSON.stringify({
    agent: init.agentInfo.name,
    stops: [written.stopReason, cancelled.stopReason],
    listed: listed.sessions.map((s) => s.sessionId).includes(sessionId),
    permissions: seen.permissions,
    answered,
    replayed: seen.texts,
  }),
);
process.exit(0);
