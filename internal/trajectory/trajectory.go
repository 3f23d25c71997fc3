// Package trajectory writes an attempt's conversation in OpenAI's chat format, for export: the
// messages the model was sent and the answers it gave, rebuilt from the trace's events by the
// rule the engine itself uses before each model call (models.TraceEvent.Turn), so that what is
// exported is what the model saw.
package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// Message is one message in OpenAI's chat format.
type Message struct {
	Role string `json:"role" enum:"system,user,assistant,tool"`
	// Content is the text, or (a user message that carries a tool result's images) the text and
	// image parts; absent on an assistant message that only calls tools.
	Content    Content    `json:"content,omitzero"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Step is an assistant message's model call, from 0 (not OpenAI's: for aligning with the
	// trace).
	Step *int `json:"step,omitempty"`
}

// Content is a message's content as OpenAI's chat format writes it: a string, or an array of
// text and image parts (the form a message with images takes). Exactly one of Text and Parts is
// set; neither, and the message has no content.
type Content struct {
	Text  *string
	Parts []ContentPart
}

// Text is content that is a string.
func Text(s string) Content { return Content{Text: &s} }

// IsZero says whether there is no content (the field is then left out).
func (c Content) IsZero() bool { return c.Text == nil && c.Parts == nil }

// MarshalJSON writes the string, or the array of parts.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Parts != nil {
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// UnmarshalJSON reads a string, an array of parts, or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	switch t := bytes.TrimSpace(b); {
	case len(t) > 0 && t[0] == '[':
		return json.Unmarshal(t, &c.Parts)
	case string(t) == "null":
		return nil
	default:
		return json.Unmarshal(t, &c.Text)
	}
}

// Schema is content's schema in the OpenAPI document: a string, or an array of parts.
func (Content) Schema(r huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: "the text, or (a message with images) an array of text and image_url parts, as OpenAI's chat format has it",
		OneOf: []*huma.Schema{
			{Type: huma.TypeString},
			{Type: huma.TypeArray, Items: r.Schema(reflect.TypeFor[ContentPart](), true, "ContentPart")},
		},
	}
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

// FromEvents rebuilds the conversation of events (one try's, in order). A brought agent's is
// what it sent: its last model call's request as the gateway relayed it, and that call's answer
// (fromRequests); the built-in loop's is rebuilt from the turns, as the engine does before each
// call.
func FromEvents(events []models.TraceEvent, urls ImageURLs) (*Conversation, error) {
	if c, ok, err := fromRequests(events, urls); ok || err != nil {
		return c, err
	}
	c := newConversation(urls)
	for _, e := range events {
		turn, ok, err := e.Turn()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if turn.System != nil {
			c.add(agent.Message{Role: agent.RoleSystem, Content: *turn.System}, nil)
			c.Tools = tools(turn.Tools)
			continue
		}
		var step *int
		if turn.Message.Role == agent.RoleAssistant {
			var d models.AssistantEventData
			if e.DecodeData(&d) == nil {
				c.count(d)
			}
			step = &turn.Step
		}
		c.add(*turn.Message, step)
	}
	return c.done(), nil
}

// fromRequests rebuilds a brought agent's conversation from the requests its model calls sent
// (AssistantEventData.Sent): the last call's, then its answer. An assistant message the agent
// repeated from an earlier answer carries that answer's step. ok is false when no call recorded
// its request (the built-in loop's trace, or one written before requests were kept).
func fromRequests(events []models.TraceEvent, urls ImageURLs) (_ *Conversation, ok bool, _ error) {
	c := newConversation(urls)
	var sent, last []agent.Message
	var offered, lastTools []agent.Tool
	steps := map[string][]int{} // an answer, as answerKey has it → its steps, in order
	lastStep := 0
	for _, e := range events {
		if e.Kind != models.EventAssistant {
			continue
		}
		var d models.AssistantEventData
		if err := e.DecodeData(&d); err != nil {
			return nil, false, fmt.Errorf("the answer at seq %d: %w", e.Seq, err)
		}
		c.count(d)
		k := answerKey(d.Message)
		steps[k] = append(steps[k], d.Step)
		if d.Sent == nil {
			continue
		}
		ok = true
		sent, offered = d.Sent.Rebuild(sent, offered)
		last, lastTools, lastStep = append(slices.Clone(sent), d.Message), offered, d.Step
	}
	if !ok {
		return nil, false, nil
	}
	c.Tools = tools(lastTools)
	// The last answer is its call's; the answers the agent repeated take the earliest step of
	// the same words not yet taken (two calls may have answered alike).
	final := answerKey(last[len(last)-1])
	steps[final] = slices.DeleteFunc(steps[final], func(s int) bool { return s == lastStep })
	for i, m := range last {
		var step *int
		if i == len(last)-1 {
			step = &lastStep
		} else if k := answerKey(m); m.Role == agent.RoleAssistant && len(steps[k]) > 0 {
			s := steps[k][0]
			steps[k], step = steps[k][1:], &s
		}
		c.add(m, step)
	}
	return c.done(), true, nil
}

// answerKey is what identifies an assistant message the agent sent back: its text and calls.
func answerKey(m agent.Message) string {
	b, _ := json.Marshal(agent.Message{Content: m.Content, ToolCalls: m.ToolCalls})
	return string(b)
}

// builder puts a conversation together message by message.
type builder struct {
	*Conversation
	urls    ImageURLs
	tokens  map[int]uuid.UUID // a model call's step → its kept tokens
	pending []ContentPart     // a run of tool results' images, sent after the run (as the adapter does)
}

func newConversation(urls ImageURLs) *builder {
	return &builder{Conversation: &Conversation{Messages: []Message{}, Tools: []Tool{}}, urls: urls, tokens: map[int]uuid.UUID{}}
}

// count adds an assistant event's model call to the usage and the calls whose tokens were kept.
func (c *builder) count(d models.AssistantEventData) {
	c.Usage.InputTokens += d.Usage.InputTokens
	c.Usage.OutputTokens += d.Usage.OutputTokens
	c.Steps++
	if d.TokensRef != nil {
		c.tokens[d.Step] = *d.TokensRef
	}
}

// add appends m in OpenAI's format; step is an assistant message's model call, when known.
func (c *builder) add(m agent.Message, step *int) {
	if m.Role != agent.RoleTool {
		c.flush()
	}
	switch m.Role {
	case agent.RoleAssistant:
		if step != nil {
			if ref, ok := c.tokens[*step]; ok {
				c.Kept = append(c.Kept, KeptCall{MessageIndex: len(c.Messages), TokensRef: ref})
				delete(c.tokens, *step)
			}
		}
		out := Message{Role: agent.RoleAssistant, Step: step}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			out.Content = Text(m.Content)
		}
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Name, Arguments: arguments(tc)}})
		}
		c.Messages = append(c.Messages, out)
	case agent.RoleTool:
		text := m.Content
		shown := 0
		for _, im := range m.Images {
			if url := c.urls(im); url != "" {
				if shown == 0 {
					c.pending = append(c.pending, ContentPart{Type: "text", Text: fmt.Sprintf("The image(s) of the result of call %s:", m.ToolCallID)})
				}
				c.pending = append(c.pending, ContentPart{Type: "image_url", ImageURL: &ImageURL{URL: url}})
				shown++
			}
		}
		if shown > 0 {
			text += fmt.Sprintf("\n[%d image(s): in the next user message]", shown)
		}
		c.Messages = append(c.Messages, Message{Role: agent.RoleTool, Content: Text(text), ToolCallID: m.ToolCallID})
	default:
		// A message the agent sent with images (a user's, say) carries them as parts.
		var parts []ContentPart
		for _, im := range m.Images {
			if url := c.urls(im); url != "" {
				parts = append(parts, ContentPart{Type: "image_url", ImageURL: &ImageURL{URL: url}})
			}
		}
		if len(parts) == 0 {
			c.Messages = append(c.Messages, Message{Role: m.Role, Content: Text(m.Content)})
			break
		}
		if m.Content != "" {
			parts = append([]ContentPart{{Type: "text", Text: m.Content}}, parts...)
		}
		c.Messages = append(c.Messages, Message{Role: m.Role, Content: Content{Parts: parts}})
	}
}

func (c *builder) flush() {
	if len(c.pending) > 0 {
		c.Messages = append(c.Messages, Message{Role: agent.RoleUser, Content: Content{Parts: c.pending}})
		c.pending = nil
	}
}

func (c *builder) done() *Conversation {
	c.flush()
	return c.Conversation
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
