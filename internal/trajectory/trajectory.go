// Package trajectory writes an attempt's conversation in OpenAI's chat format, for export: the
// messages the model was sent and the answers it gave, rebuilt from the trace's events by the
// rule the engine itself uses before each model call (models.TraceEvent.Turn), so that what is
// exported is what the model saw.
package trajectory

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// Message is one message in OpenAI's chat format.
type Message struct {
	Role string `json:"role" enum:"system,user,assistant,tool"`
	// Content is the text; a user message that carries a tool result's images is a list of
	// parts instead (ContentParts), and Content is then absent.
	Content      *string       `json:"content,omitempty"`
	ContentParts []ContentPart `json:"content_parts,omitempty" doc:"in place of content: text and image parts (OpenAI's content array)"`
	ToolCalls    []ToolCall    `json:"tool_calls,omitempty"`
	ToolCallID   string        `json:"tool_call_id,omitempty"`
	// Step is an assistant message's model call, from 0 (not OpenAI's: for aligning with the
	// trace).
	Step *int `json:"step,omitempty"`
}

// ContentPart is a text or image part.
type ContentPart struct {
	Type     string    `json:"type" enum:"text,image_url"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL locates an image.
type ImageURL struct {
	URL string `json:"url"`
}

// ToolCall is an assistant's call of a tool.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type" enum:"function"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the tool and its arguments, a JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool the model was shown, as OpenAI's tools list it.
type Tool struct {
	Type     string       `json:"type" enum:"function"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec describes a tool.
type FunctionSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters"`
}

// Conversation is an attempt's messages and tools, and the tokens its model calls used.
type Conversation struct {
	Messages []Message
	Tools    []Tool
	Usage    agent.Usage
	Steps    int
	// Kept are the model calls whose tokens were kept (a training policy's), in order.
	Kept []KeptCall
}

// KeptCall is a model call whose tokens were kept: the index in Messages of the assistant
// message it answered with, and the kept tokens' reference (AssistantEventData.TokensRef).
type KeptCall struct {
	MessageIndex int
	TokensRef    uuid.UUID
}

// ImageURLs gives the URL an image is read at (a signed URL of the object keeping it), or "".
type ImageURLs func(agent.Image) string

// FromEvents rebuilds the conversation of events (one try's, in order).
func FromEvents(events []models.TraceEvent, urls ImageURLs) (*Conversation, error) {
	c := &Conversation{Messages: []Message{}, Tools: []Tool{}}
	var pending []ContentPart // a run of tool results' images, sent after the run (as the adapter does)
	flush := func() {
		if len(pending) > 0 {
			c.Messages = append(c.Messages, Message{Role: agent.RoleUser, ContentParts: pending})
			pending = nil
		}
	}
	for _, e := range events {
		turn, ok, err := e.Turn()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if turn.System != nil {
			c.Messages = append(c.Messages, Message{Role: agent.RoleSystem, Content: turn.System})
			c.Tools = tools(turn.Tools)
			continue
		}
		m := turn.Message
		if m.Role != agent.RoleTool {
			flush()
		}
		switch m.Role {
		case agent.RoleAssistant:
			var d models.AssistantEventData
			if err := e.DecodeData(&d); err == nil {
				c.Usage.InputTokens += d.Usage.InputTokens
				c.Usage.OutputTokens += d.Usage.OutputTokens
				if d.TokensRef != nil {
					c.Kept = append(c.Kept, KeptCall{MessageIndex: len(c.Messages), TokensRef: *d.TokensRef})
				}
			}
			step := turn.Step
			out := Message{Role: agent.RoleAssistant, Step: &step}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				out.Content = &m.Content
			}
			for _, tc := range m.ToolCalls {
				out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Name, Arguments: arguments(tc)}})
			}
			c.Messages = append(c.Messages, out)
			c.Steps++
		case agent.RoleTool:
			text := m.Content
			shown := 0
			for _, im := range m.Images {
				if url := urls(im); url != "" {
					if shown == 0 {
						pending = append(pending, ContentPart{Type: "text", Text: fmt.Sprintf("The image(s) of the result of call %s:", m.ToolCallID)})
					}
					pending = append(pending, ContentPart{Type: "image_url", ImageURL: &ImageURL{URL: url}})
					shown++
				}
			}
			if shown > 0 {
				text += fmt.Sprintf("\n[%d image(s): in the next user message]", shown)
			}
			c.Messages = append(c.Messages, Message{Role: agent.RoleTool, Content: &text, ToolCallID: m.ToolCallID})
		default:
			content := m.Content
			c.Messages = append(c.Messages, Message{Role: m.Role, Content: &content})
		}
	}
	flush()
	return c, nil
}

func tools(ts []agent.Tool) []Tool {
	out := make([]Tool, len(ts))
	for i, t := range ts {
		params := t.InputSchema
		if params == nil {
			params = map[string]any{"type": "object"}
		}
		out[i] = Tool{Type: "function", Function: FunctionSpec{Name: t.Name, Description: t.Description, Parameters: params}}
	}
	return out
}

// arguments is a call's arguments as the JSON text the model wrote (its raw text when it was no
// JSON object).
func arguments(tc agent.ToolCall) string {
	if tc.Arguments == nil {
		if tc.InvalidArguments != "" {
			return tc.InvalidArguments
		}
		return "{}"
	}
	b, err := json.Marshal(tc.Arguments)
	if err != nil {
		return "{}"
	}
	return string(b)
}
