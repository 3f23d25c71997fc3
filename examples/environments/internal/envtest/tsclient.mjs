// tsclient.mjs drives an MCP server with the official TypeScript SDK client, so that the Go test
// suite checks the environments against a client that is not the Go SDK.
//
// usage: node tsclient.mjs <sdk-prefix> <plan-json>
//
// <sdk-prefix> is the npm --prefix the SDK was installed into. The plan says how to connect
// ({"stdio": {"command", "args"}} or {"http": "<url>"}) and what to do:
// {"calls": [{"name", "arguments"}], "resources": ["<uri>"], "prompts": [{"name", "arguments"}]}.
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

const client = new Client({ name: "proctor-ts-client", version: "1.0.0" });
const out = { calls: [], resources: {}, prompts: [] };
try {
  await client.connect(transport);
  out.serverInfo = client.getServerVersion();
  out.instructions = client.getInstructions();
  // listTools also primes the SDK's output-schema validators, so every call below is checked
  // against the tool's declared output schema by the TypeScript client itself.
  out.tools = (await client.listTools()).tools;
  for (const call of plan.calls ?? []) {
    const res = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
    out.calls.push({ name: call.name, isError: res.isError ?? false, structuredContent: res.structuredContent, content: res.content });
  }
  for (const uri of plan.resources ?? []) {
    const res = await client.readResource({ uri });
    out.resources[uri] = JSON.parse(res.contents[0].text);
  }
  for (const p of plan.prompts ?? []) {
    const res = await client.getPrompt({ name: p.name, arguments: p.arguments ?? {} });
    out.prompts.push(res);
  }
} catch (err) {
  out.error = String(err?.stack ?? err);
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.error ? 1 : 0);
