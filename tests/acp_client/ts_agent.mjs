// A small ACP agent on the official TypeScript SDK (@agentclientprotocol/sdk), for driving from
// Raven's ACP client: a second, independent implementation of the agent side (the SDK parses
// each request with its generated schema before a handler runs). Its prompt starts a tool
// call, asks permission, names the outcome and echoes the prompt's text.
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const update = acp.methods.client.session.update;

const app = acp
  .agent({ name: "ts-sdk-test-agent" })
  .onRequest(acp.methods.agent.initialize, ({ params }) => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: {},
    authMethods: [],
    agentInfo: { name: "ts-sdk-test-agent", version: "1.0.0" },
    _meta: { clientInfo: params.clientInfo ?? null },
  }))
  .onRequest(acp.methods.agent.session.new, () => ({ sessionId: "ts-1" }))
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const sessionId = params.sessionId;
    const call = {
      toolCallId: "t1",
      title: "Edit notes.txt",
      kind: "edit",
      locations: [{ path: "notes.txt" }],
      rawInput: { path: "notes.txt", content: "hi" },
    };
    await client.notify(update, {
      sessionId,
      update: { sessionUpdate: "tool_call", status: "pending", ...call },
    });
    const answer = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall: call,
      options: [
        { optionId: "once", name: "Allow once", kind: "allow_once" },
        { optionId: "always", name: "Always allow", kind: "allow_always" },
        { optionId: "no", name: "Reject", kind: "reject_once" },
      ],
    });
    const chosen = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled";
    await client.notify(update, {
      sessionId,
      update: { sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed" },
    });
    const text = params.prompt.map((block) => block.text ?? "").join(" ");
    await client.notify(update, {
      sessionId,
      update: {
        sessionUpdate: "agent_message_chunk",
        content: { type: "text", text: `ts agent got "${text}", permission ${chosen}` },
      },
    });
    return { stopReason: "end_turn" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {});

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await connection.closed;
