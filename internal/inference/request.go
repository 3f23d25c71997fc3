package inference

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/proctorhq/proctor/internal/agent"
)

// Request is a model call's request as the calling agent sent it, in the agent package's terms:
// the conversation (its system prompt first, as OpenAI's chat format carries it; Anthropic's
// system field becomes that message) and the tools it offered. Images sent inline (data URLs,
// base64 sources) are decoded, to be kept in object storage; an image sent by URL is a line of the
// message's text ("[image: URL]"); a part of another kind (audio, a file) is a line naming its
// type. Anthropic's thinking blocks, handed back with earlier answers, are left out, as they are
// from the recorded answers.
type Request struct {
	Messages []agent.Message
	Tools    []agent.Tool
}

// ParseRequest reads the conversation and tools of a chat request's body (OpenAI's chat
// completions or Anthropic's messages, by protocol).
func ParseRequest(protocol string, body map[string]json.RawMessage) (Request, error) {
	if protocol == ProtocolOpenAI {
		return parseOpenAIRequest(body)
	}
	return parseAnthropicRequest(body)
}

// openAIMessage is a message of a chat completions request, as its JSON has it.
type openAIMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []openAICall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type openAICall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// contentPart is a part of a message's content in either protocol: OpenAI's text and image_url,
// Anthropic's text, image, tool_use and tool_result.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
	Source struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func parseOpenAIRequest(body map[string]json.RawMessage) (Request, error) {
	var msgs []openAIMessage
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return Request{}, fmt.Errorf("messages: %w", err)
	}
	var req Request
	for i, m := range msgs {
		out := agent.Message{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Role == "developer" {
			out.Role = agent.RoleSystem
		}
		var err error
		if out.Content, out.Images, err = contentOf(m.Content, nil); err != nil {
			return Request{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, toolCall(tc.ID, tc.Function.Name, []byte(tc.Function.Arguments)))
		}
		req.Messages = append(req.Messages, out)
	}
	var tools []struct {
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	if raw, ok := body["tools"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return Request{}, fmt.Errorf("tools: %w", err)
		}
	}
	for _, t := range tools {
		req.Tools = append(req.Tools, agent.Tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	return req, nil
}

func parseAnthropicRequest(body map[string]json.RawMessage) (Request, error) {
	var req Request
	if raw, ok := body["system"]; ok && !isNull(raw) {
		text, _, err := contentOf(raw, nil)
		if err != nil {
			return Request{}, fmt.Errorf("system: %w", err)
		}
		req.Messages = append(req.Messages, agent.Message{Role: agent.RoleSystem, Content: text})
	}
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(body["messages"], &msgs); err != nil {
		return Request{}, fmt.Errorf("messages: %w", err)
	}
	for i, m := range msgs {
		// A user turn's tool results are messages of their own, as they are in OpenAI's format
		// and in the trace; the rest of the turn follows them.
		var results []agent.Message
		out := agent.Message{Role: m.Role}
		var err error
		out.Content, out.Images, err = contentOf(m.Content, func(p contentPart) error {
			switch p.Type {
			case "tool_use":
				out.ToolCalls = append(out.ToolCalls, toolCall(p.ID, p.Name, p.Input))
			case "thinking", "redacted_thinking":
				// The model's own reasoning, handed back: not a message of the conversation
				// (the answer it came with is recorded without it too).
			case "tool_result":
				r := agent.Message{Role: agent.RoleTool, ToolCallID: p.ToolUseID, IsError: p.IsError}
				var err error
				if r.Content, r.Images, err = contentOf(p.Content, nil); err != nil {
					return err
				}
				results = append(results, r)
			default:
				return errOtherPart
			}
			return nil
		})
		if err != nil {
			return Request{}, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		req.Messages = append(req.Messages, results...)
		if out.Content != "" || len(out.Images) > 0 || len(out.ToolCalls) > 0 || len(results) == 0 {
			req.Messages = append(req.Messages, out)
		}
	}
	var tools []agent.Tool
	if raw, ok := body["tools"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return Request{}, fmt.Errorf("tools: %w", err)
		}
	}
	req.Tools = tools
	return req, nil
}

// errOtherPart tells contentOf that a part is none its caller reads: it becomes a line naming it.
var errOtherPart = fmt.Errorf("a part of another kind")

// contentOf reads a message's content, a string or an array of parts: its text (the text parts'
// lines) and its inline images. Parts of other kinds go to other (when given) or become a line
// naming their type.
func contentOf(raw json.RawMessage, other func(contentPart) error) (string, []agent.Image, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || isNull(raw) {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, nil, err
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, err
	}
	var lines []string
	var images []agent.Image
	for _, p := range parts {
		switch {
		case p.Type == "text":
			lines = append(lines, p.Text)
		case p.Type == "image_url":
			if im, ok := dataURLImage(p.ImageURL.URL); ok {
				images = append(images, im)
			} else {
				lines = append(lines, "[image: "+p.ImageURL.URL+"]")
			}
		case p.Type == "image" && p.Source.Type == "base64":
			data, err := base64.StdEncoding.DecodeString(p.Source.Data)
			if err != nil {
				return "", nil, fmt.Errorf("an image's data: %w", err)
			}
			images = append(images, agent.NewImage(p.Source.MediaType, data))
		case p.Type == "image" && p.Source.URL != "":
			lines = append(lines, "[image: "+p.Source.URL+"]")
		default:
			err := errOtherPart
			if other != nil {
				err = other(p)
			}
			if err == errOtherPart {
				lines = append(lines, "["+p.Type+" part]")
			} else if err != nil {
				return "", nil, err
			}
		}
	}
	return strings.Join(lines, "\n"), images, nil
}

// dataURLImage decodes a base64 data URL of an image.
func dataURLImage(url string) (agent.Image, bool) {
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		return agent.Image{}, false
	}
	meta, payload, ok := strings.Cut(rest, ",")
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	if !ok || !isBase64 || !strings.HasPrefix(mime, "image/") {
		return agent.Image{}, false
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return agent.Image{}, false
	}
	return agent.NewImage(mime, data), true
}

// toolCall is a call the agent's conversation carries, its arguments read by the rule its answer
// was read by (agent.ParseArguments), so that a repeated answer reads the same.
func toolCall(id, name string, args []byte) agent.ToolCall {
	parsed, invalid := agent.ParseArguments(string(args))
	return agent.ToolCall{ID: id, Name: name, Arguments: parsed, InvalidArguments: invalid}
}
