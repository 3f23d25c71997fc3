// Command react is an example of an agent brought to Proctor (README, "Bringing your agent"): a
// ReAct-style loop written with nothing but the official OpenAI and MCP Go SDKs, and nothing
// Proctor-specific beyond reading its task from the environment. Run by Proctor it is given:
//
//	PROCTOR_PROMPT    the task's prompt
//	PROCTOR_MODEL     the model the launch allows
//	PROCTOR_MCP_URL   the attempt's environment, an MCP server over streamable HTTP
//	OPENAI_BASE_URL   the gateway's OpenAI-compatible endpoint, and OPENAI_API_KEY a key for
//	                  this attempt only (the OpenAI SDK reads both by itself)
//	PROCTOR_PLACEMENT "inside" when it runs inside the environment, in its working directory
//	PROCTOR_AGENT_ROOT where this image's files are then: the sandbox is the environment's image
//
// It asks the model, makes the tool calls the model asks for through MCP, and sends the results
// back, until the model answers without tool calls. Proctor records every model call and every
// tool call on its own: the agent needs no instrumentation. Deployed to run inside the
// environment (`proctor agent deploy --inside`), it also offers the model two file tools of its
// own, read_file and write_file, in the working directory it shares with the environment: those
// are the agent's, not the environment's, so Proctor sees them only as the model's tool calls.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// maxTurns bounds the loop on its own; Proctor's max_steps bounds it from outside as well.
const maxTurns = 100

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "react:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	prompt, model, mcpURL := os.Getenv("PROCTOR_PROMPT"), os.Getenv("PROCTOR_MODEL"), os.Getenv("PROCTOR_MCP_URL")
	if prompt == "" || model == "" || mcpURL == "" {
		return errors.New("PROCTOR_PROMPT, PROCTOR_MODEL and PROCTOR_MCP_URL must be set (Proctor sets them)")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "react-example", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL}, nil)
	if err != nil {
		return fmt.Errorf("connect to the environment: %w", err)
	}
	defer session.Close()
	var tools []openai.ChatCompletionToolUnionParam
	inside := os.Getenv("PROCTOR_PLACEMENT") == "inside"
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		if inside && (t.Name == "read_file" || t.Name == "write_file") {
			continue // the agent's own file tools answer to these names (a model sees each name once)
		}
		schema := map[string]any{}
		if b, err := json.Marshal(t.InputSchema); err == nil {
			json.Unmarshal(b, &schema) //nolint:errcheck // an unreadable schema is sent empty
		}
		if _, ok := schema["properties"]; !ok {
			schema["type"], schema["properties"] = "object", map[string]any{}
		}
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(schema)}))
	}
	if inside {
		tools = append(tools, fileTools...)
	}
	fmt.Fprintf(os.Stderr, "react: %d tools, model %s\n", len(tools), model)

	// The system prompt opens with what the environment says of itself (its MCP instructions).
	system := "You solve the task with the tools you are given. Think step by step; call tools to act; answer without tool calls when the task is done."
	if init := session.InitializeResult(); init != nil && init.Instructions != "" {
		system = init.Instructions + "\n\n" + system
	}
	llm := openai.NewClient() // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
	params := openai.ChatCompletionNewParams{
		Model:    model,
		Tools:    tools,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)},
	}
	for turn := 0; turn < maxTurns; turn++ {
		completion, err := llm.Chat.Completions.New(ctx, params)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn, err)
		}
		if len(completion.Choices) == 0 {
			return fmt.Errorf("turn %d: the model answered no choices", turn)
		}
		msg := completion.Choices[0].Message
		params.Messages = append(params.Messages, msg.ToParam())
		if len(msg.ToolCalls) == 0 {
			fmt.Println(msg.Content)
			return nil
		}
		for _, tc := range msg.ToolCalls {
			var args map[string]any
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
				params.Messages = append(params.Messages, openai.ToolMessage("the arguments must be a JSON object: "+err.Error(), tc.ID))
				continue
			}
			if inside {
				if text, ok := fileTool(tc.Function.Name, args); ok {
					params.Messages = append(params.Messages, openai.ToolMessage(text, tc.ID))
					continue
				}
			}
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tc.Function.Name, Arguments: args})
			if err != nil {
				// A call the server refused (an unknown tool …) is the model's to correct.
				params.Messages = append(params.Messages, openai.ToolMessage("error: "+err.Error(), tc.ID))
				continue
			}
			params.Messages = append(params.Messages, openai.ToolMessage(resultText(res), tc.ID))
		}
	}
	return fmt.Errorf("no answer after %d turns", maxTurns)
}

// resultText is a tool result as the model reads it: its text parts, and whether it failed.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	if res.IsError {
		parts = append(parts, "error:")
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// fileTools are the agent's own tools inside an environment: files of the working directory.
var fileTools = []openai.ChatCompletionToolUnionParam{
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "read_file",
		Description: openai.String("Read a file of the working directory."),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"path"},
			"properties": map[string]any{"path": map[string]any{"type": "string", "description": "relative to the working directory"}}}}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "write_file",
		Description: openai.String("Write a file of the working directory, replacing what it held."),
		Parameters: shared.FunctionParameters{"type": "object", "required": []string{"path", "content"},
			"properties": map[string]any{"path": map[string]any{"type": "string", "description": "relative to the working directory"},
				"content": map[string]any{"type": "string"}}}}),
}

// fileTool runs the file tool name with args and says what it did; ok is false for a name that
// is not one of fileTools. Paths stay within the working directory.
func fileTool(name string, args map[string]any) (text string, ok bool) {
	if name != "read_file" && name != "write_file" {
		return "", false
	}
	path, _ := args["path"].(string)
	if path == "" || !filepath.IsLocal(path) {
		return fmt.Sprintf("error: path %q: give a path relative to the working directory, within it", path), true
	}
	if name == "read_file" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "error: " + err.Error(), true
		}
		return string(b), true
	}
	content, _ := args["content"].(string)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "error: " + err.Error(), true
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return "error: " + err.Error(), true
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(content), path), true
}
