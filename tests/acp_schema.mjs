// Frames read by the ACP TypeScript SDK's own v1 schemas, the stable one (argv[2]) and the
// unstable one (argv[3]): each stdin line is a JSON array of [validator, value, "stable" |
// "unstable"]; each stdout line, for the same items, the SDK's reading ({"ok": …}) or its
// complaint ({"error": …}). Runs until stdin ends, so one process serves a whole test run.
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const schemas = {
  stable: await import(pathToFileURL(process.argv[2]).href),
  unstable: await import(pathToFileURL(process.argv[3]).href),
};
for await (const line of createInterface({ input: process.stdin })) {
  const read = JSON.parse(line).map(([name, value, version]) => {
    const validator = schemas[version][name];
    if (validator === undefined) return { error: `no validator ${name} in the ${version} schema` };
    const parsed = validator.safeParse(value);
    return parsed.success ? { ok: parsed.data } : { error: parsed.error.issues };
  });
  process.stdout.write(JSON.stringify(read) + "\n");
}
