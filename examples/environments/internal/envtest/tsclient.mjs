// tsclient.mjs drives an MCP server with the official TypeScript SDK client, so that the Go test
// suite checks the environments against a client that is not the Go SDK.
//
// usage: node tsclient.mjs <sdk-prefix> <plan-json>
//
// <sdk-prefix> is the npm --prefix the SDK was installed into. The plan says how to connect
// ({"stdio": {"command", "args"}} or {"http": "<url>"}) and what to do:
// {"calls": [{"name", "arguments", "progress"}], "resources": ["<uri>"], "raw_resources": ["<uri>"],
// "prompts": [{"name", "arguments"}], "log_level", "subscribe": ["<uri>"], "templates": true,
// "completions": [{"ref", "argument"}]}.
// The script prints one JSON object with what the server answered; the Go test checks it.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [sdkPrefix, planJSON] = process.argv.slice(2);
const plan = JSON.parse(planJSON);
const sdk = (p) =>
  import(pathToFileURL(path.join(sdkPrefix, "node_modules/@modelcontextprotocol/sdk/dist/esm", p)).href);

const { Client } = await sdk("client/index.js");
let transport;
if (plan.stdio) {
  const { StdioClientTransport } = await sdk("client/stdio.js");
  transport = new StdioClientTransport({ command: plan.stdio.command, args: plan.stdio.args ?? [], stderr: "inherit" });
} else {
  const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(plan.http));
}

const { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } = await sdk("types.js");
const client = new Client({ name: "proctor-ts-client", version: "1.0.0" });
const out = { calls: [], resources: {}, raw_resources: {}, prompts: [], logs: [], updated: [], completions: [] };
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => out.logs.push(n.params));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => out.updated.push(n.params.uri));
try {
  await client.connect(transport);
  out.serverInfo = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  out.instructions = client.getInstructions();
  if (plan.log_level) await client.setLoggingLevel(plan.log_level);
  for (const uri of plan.subscribe ?? []) await client.subscribeResource({ uri });
  if (plan.templates) out.templates = (await client.listResourceTemplates()).resourceTemplates;
  // listTools also primes the SDK's output-schema validators, so every call below is checked
  // against the tool's declared output schema by the TypeScript client itself.
  out.tools = (await client.listTools()).tools;
  for (const call of plan.calls ?? []) {
    const progress = [];
    const opts = call.progress ? { onprogress: (p) => progress.push(p) } : undefined;
    const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} }, undefined, opts);
    // Image and audio data are reported by size and first bytes, not as a whole.
    const content = (res.content ?? []).map((c) =>
      c.data ? { type: c.type, mimeType: c.mimeType, bytes: Buffer.from(c.data, "base64").length, head: Buffer.from(c.data, "base64").subarray(0, 8).toString("hex") } : c);
    out.calls.push({ name: call.name, isError: res.isError ?? false, structuredContent: res.structuredContent, content, progress });
  }
  for (const uri of plan.raw_resources ?? []) {
    const c = (await client.readResource({ uri })).contents[0];
    out.raw_resources[uri] = { mimeType: c.mimeType, text: c.text, blobBytes: c.blob ? Buffer.from(c.blob, "base64").length : 0,
      head: c.blob ? Buffer.from(c.blob, "base64").subarray(0, 8).toString("hex") : "" };
  }
  for (const c of plan.completions ?? []) {
    out.completions.push((await client.complete({ ref: c.ref, argument: c.argument })).completion);
  }
  for (const uri of plan.resources ?? []) {
    const res = await client.readResource({ uri });
    out.resources[uri] = JSON.parse(res.contents[0].text);
  }
  for (const p of plan.prompts ?? []) {
    const res = await client.getPrompt({ name: p.name, arguments: p.arguments ?? {} });
    out.prompts.push(res);
  }
  // Notifications (logs, updates) may trail the answers they belong to.
  if (plan.log_level || plan.subscribe) await new Promise((r) => setTimeout(r, 300));
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.error ? 1 : 0);
