// An example of an agent brought to Proctor in TypeScript (README, "Bringing your agent"): a
// ReAct-style loop written with nothing but the official OpenAI and MCP TypeScript SDKs, run by
// Node 22 as it is (Node strips the types). Run by Proctor it is given:
//
//   PROCTOR_PROMPT   the task's prompt
//   PROCTOR_MODEL    the model the launch allows
//   PROCTOR_MCP_URL  the attempt's environment, an MCP server over streamable HTTP
//   OPENAI_BASE_URL  the gateway's OpenAI-compatible endpoint, and OPENAI_API_KEY a key for
//                    this attempt only (the OpenAI SDK reads both by itself)
//   PROCTOR_PLACEMENT "inside" when it runs inside the environment, in its working directory
//
// It asks the model, makes the tool calls the model asks for through MCP, and sends the results
// back, until the model answers without tool calls. Proctor records every model call and every
// tool call on its own: the agent needs no instrumentation. Deployed to run inside the
// environment (`proctor agent deploy --inside`), it also offers the model two file tools of its
// own, read_file and write_file, in the working directory it shares with the environment. There
// Node runs from this image (at $PROCTOR_AGENT_ROOT) on its own libraries, whatever the
// environment's image holds.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, normalize } from "node:path";
import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

// maxTurns bounds the loop on its own; Proctor's max_steps bounds it from outside as well.
const maxTurns = 100;

async function main(): Promise<void> {
  const { PROCTOR_PROMPT: prompt, PROCTOR_MODEL: model, PROCTOR_MCP_URL: mcpURL } = process.env;
  if (!prompt || !model || !mcpURL) throw new Error("PROCTOR_PROMPT, PROCTOR_MODEL and PROCTOR_MCP_URL must be set (Proctor sets them)");

  const env = new Client({ name: "react-ts-example", version: "1.0.0" });
  await env.connect(new StreamableHTTPClientTransport(new URL(mcpURL)));
  try {
    const { tools } = await env.listTools();
    const inside = process.env.PROCTOR_PLACEMENT === "inside";
    // Inside, the agent's own file tools answer to their names: an environment's tool of the same
    // name (a Harbor task's write_file) is left out, so that the model sees each name once.
    const own = new Set(inside ? fileTools.map((t) => (t.type === "function" ? t.function.name : "")) : []);
    const offered: ChatCompletionTool[] = tools
      .filter((t) => !own.has(t.name))
      .map((t) => ({
        type: "function",
        function: { name: t.name, description: t.description ?? "", parameters: { properties: {}, ...t.inputSchema } },
      }));
    if (inside) offered.push(...fileTools);
    console.error(`react-ts: ${offered.length} tools, model ${model}`);

    // The system prompt opens with what the environment says of itself (its MCP instructions).
    let system = "You solve the task with the tools you are given. Think step by step; call tools to act; answer without tool calls when the task is done.";
    const instructions = env.getInstructions();
    if (instructions) system = `${instructions}\n\n${system}`;
    const messages: ChatCompletionMessageParam[] = [
      { role: "system", content: system },
      { role: "user", content: prompt },
    ];
    const llm = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    for (let turn = 0; turn < maxTurns; turn++) {
      const completion = await llm.chat.completions.create({ model, messages, tools: offered });
      const msg = completion.choices[0]?.message;
      if (!msg) throw new Error(`turn ${turn}: the model answered no choices`);
      messages.push(msg);
      if (!msg.tool_calls?.length) {
        console.log(msg.content ?? "");
        return;
      }
      for (const call of msg.tool_calls) {
        if (call.type !== "function") continue;
        let content: string;
        const own = inside ? fileTool(call.function.name, call.function.arguments) : undefined;
        if (own !== undefined) {
          messages.push({ role: "tool", tool_call_id: call.id, content: own });
          continue;
        }
        try {
          const res = await env.callTool({ name: call.function.name, arguments: JSON.parse(call.function.arguments || "{}") });
          const parts = (res.content as { type: string; text?: string }[]).filter((c) => c.type === "text").map((c) => c.text ?? "");
          content = (res.isError ? ["error:", ...parts] : parts).join("\n");
        } catch (err) {
          // Arguments that are no JSON, or a call the server refused, are the model's to correct.
          content = `error: ${err instanceof Error ? err.message : String(err)}`;
        }
        messages.push({ role: "tool", tool_call_id: call.id, content });
      }
    }
    throw new Error(`no answer after ${maxTurns} turns`);
  } finally {
    await env.close();
  }
}

// fileTools are the agent's own tools inside an environment: files of the working directory.
const fileTools: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file of the working directory.",
      parameters: { type: "object", required: ["path"], properties: { path: { type: "string", description: "relative to the working directory" } } },
    },
  },
  {
    type: "function",
    function: {
      name: "write_file",
      description: "Write a file of the working directory, replacing what it held.",
      parameters: {
        type: "object",
        required: ["path", "content"],
        properties: { path: { type: "string", description: "relative to the working directory" }, content: { type: "string" } },
      },
    },
  },
];

// fileTool runs the file tool name with its JSON arguments and says what it did; undefined for a
// name that is not one of fileTools. Paths stay within the working directory.
function fileTool(name: string, rawArgs: string): string | undefined {
  if (name !== "read_file" && name !== "write_file") return undefined;
  try {
    const args = JSON.parse(rawArgs || "{}") as { path?: unknown; content?: unknown };
    const path = typeof args.path === "string" ? normalize(args.path) : "";
    if (path === "" || isAbsolute(path) || path === ".." || path.startsWith("../")) {
      return `error: path ${JSON.stringify(args.path)}: give a path relative to the working directory, within it`;
    }
    if (name === "read_file") return readFileSync(path, "utf8");
    const content = typeof args.content === "string" ? args.content : "";
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
    return `wrote ${Buffer.byteLength(content)} bytes to ${path}`;
  } catch (err) {
    return `error: ${err instanceof Error ? err.message : String(err)}`;
  }
}

main().catch((err) => {
  console.error("react-ts:", err instanceof Error ? err.message : err);
  process.exit(1);
});
