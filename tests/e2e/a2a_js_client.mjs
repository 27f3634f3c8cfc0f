// The official A2A JavaScript client (@a2a-js/sdk), driven line by line by a test.
//
//   node a2a_js_client.mjs BASE_URL TOKEN
//
// Fetches the agent card under BASE_URL, then reads one JSON command a line from stdin and
// answers each with one JSON line on stdout:
//   {"op": "send", "text": ..., "taskId"?, "contextId"?, "returnImmediately"?}
//   {"op": "get", "taskId": ...}        {"op": "cancel", "taskId": ...}
// A task is answered as {"id", "contextId", "state", "text"} (its state's name and its
// status message's text); an error as {"error": message}.
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";

import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  DefaultAgentCardResolver,
} from "@a2a-js/sdk/client";

const [base, token] = process.argv.slice(2);
const authorized = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(input, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authorized })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authorized }),
  }),
);
const client = await factory.createFromUrl(base);

function shown(task) {
  const parts = task.status?.message?.parts ?? [];
  const text = parts
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .join("");
  return { id: task.id, contextId: task.contextId, state: TaskState[task.status?.state], text };
}

async function run(command) {
  if (command.op === "send") {
    const message = {
      messageId: randomUUID(),
      contextId: command.contextId ?? "",
      taskId: command.taskId ?? "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: command.text } }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    };
    const configuration = command.returnImmediately
      ? { acceptedOutputModes: [], returnImmediately: true }
      : undefined;
    const result = await client.sendMessage({ tenant: "", message, configuration, metadata: undefined });
    const task = result.payload?.$case === "task" ? result.payload.value : result.task ?? result;
    return shown(task);
  }
  if (command.op === "get") {
    return shown(await client.getTask({ tenant: "", id: command.taskId, historyLength: undefined }));
  }
  if (command.op === "cancel") {
    return shown(await client.cancelTask({ tenant: "", id: command.taskId, metadata: undefined }));
  }
  return { error: `unknown op ${command.op}` };
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  let answer;
  try {
    answer = await run(JSON.parse(line));
  } catch (error) {
    answer = { error: String(error?.message ?? error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
}
