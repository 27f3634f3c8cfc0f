// An editor on the official ACP TypeScript SDK (schema 1.25) that declares
// `session.compaction`. It starts `raven acp` as an editor does (arguments: the command as
// JSON, the session's folder, how many prompts to send), sends the prompts one after
// another, then loads the session on a second `raven acp`; it prints every update it saw
// (live, then replayed) as one JSON object.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [command, cwd, turns] = process.argv.slice(2);
const argv = JSON.parse(command);
const capabilities = { session: { compaction: {} } };

async function editor(seen) {
  const child = spawn(argv[0], argv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const app = acp
    .client({ name: "ts-compacting-editor" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      seen.push(params.update);
    });
  const connection = app.connect(stream);
  await connection.agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: capabilities,
  });
  const stop = async () => {
    child.stdin.end();
    await new Promise((done) => child.on("exit", done));
  };
  return { agent: connection.agent, stop };
}

const live = [];
const first = await editor(live);
const { sessionId } = await first.agent.request(acp.methods.agent.session.new, {
  cwd,
  mcpServers: [],
});
const stops = [];
for (let n = 0; n < Number(turns); n++) {
  const said = n === 0 ? "the release is code-named plum" : `step ${n}: ` + "go on ".repeat(40);
  const { stopReason } = await first.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: said }],
  });
  stops.push(stopReason);
}
await first.stop();

const replayed = [];
const second = await editor(replayed);
await second.agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
await second.stop();
console.log(JSON.stringify({ stops, live, replayed }));
