// An example of an agent brought to Proctor in TypeScript (README, "Bringing your agent"): a
// ReAct-style loop written with nothing but the official OpenAI and MCP TypeScript SDKs, run by
// Node 22 as it is (Node strips the types). Run by Proctor it is given:
//
//   PROCTOR_PROMPT   the task's prompt
//   PROCTOR_MODEL    the model the launch allows
//   PROCTOR_MCP_URL  the attempt's environment, an MCP server over streamable HTTP
//   OPENAI_BASE_URL  the gateway's OpenAI-compatible endpoint, and OPENAI_API_KEY a key for
//                    this attempt only (the OpenAI SDK reads both by itself)
//
// It asks the model, makes the tool calls the model asks for through MCP, and sends the results
// back, until the model answers without tool calls. Proctor records every model call and every
// tool call on its own: the agent needs no instrumentation.
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
    const offered: ChatCompletionTool[] = tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description ?? "", parameters: { properties: {}, ...t.inputSchema } },
    }));
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

main().catch((err) => {
  console.error("react-ts:", err instanceof Error ? err.message : err);
  process.exit(1);
});
