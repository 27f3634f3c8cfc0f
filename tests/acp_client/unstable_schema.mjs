// Frames (a JSON array on stdin) read by the ACP TypeScript SDK's own unstable v1 schema:
// its zod validator named by the second argument (session notifications unless named);
// for each, the SDK's reading or its complaint.
import { pathToFileURL } from "node:url";

const schema = await import(pathToFileURL(process.argv[2]).href);
const validator = schema[process.argv[3] ?? "zSessionNotification"];
let input = "";
for await (const chunk of process.stdin) input += chunk;
const read = JSON.parse(input).map((notification) => {
  const parsed = validator.safeParse(notification);
  return parsed.success ? { ok: parsed.data } : { error: parsed.error.issues };
});
process.stdout.write(JSON.stringify(read));
