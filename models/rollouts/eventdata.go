package rollouts

import (
	"encoding/json"

	"github.com/proctorhq/proctor/internal/agent"
)

// The payload of each kind of trace event: an event's Data is the JSON of one of these, by its
// Kind. The API serves it as the event's data object; the engine reads the conversation back
// from it before each model call, so what a model is sent is what the trace shows. A brought
// agent's trace is written in the same shapes.

// SetupEventData is the data of a setup event: a scenario's setup call and what it returned.
type SetupEventData struct {
	Call   agent.Call        `json:"call"`
	Result *agent.ToolResult `json:"result"`
}

// ToolCallEventData is the data of a tool_call event: a call the model asked for.
type ToolCallEventData struct {
	Step   int    `json:"step"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	// Arguments are the model's arguments, a JSON object of the tool's own schema.
	Arguments map[string]any `json:"arguments"`
}

// ToolResultEventData is the data of a tool_result event: what the environment answered.
type ToolResultEventData struct {
	Step    int    `json:"step"`
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	IsError bool   `json:"is_error"`
	// Structured is the result's structured content, a JSON object of the tool's own schema.
	Structured map[string]any `json:"structured"`
	// Message is the result as the model is sent it.
	Message agent.Message `json:"message"`
	// Images are the result's images, each with the key of the object that keeps it (absent when
	// it could not be kept). The API serves them as the event's images, with URLs.
	Images []agent.Image `json:"images,omitempty"`
}

// EvaluateEventData is the data of an evaluate event: a scenario's evaluate call, what it
// returned and the reward read from it.
type EvaluateEventData struct {
	Call   agent.Call        `json:"call"`
	Result *agent.ToolResult `json:"result"`
	Reward float64           `json:"reward"`
}

// EventData is v as an event's data. A value that does not encode (it cannot happen with the
// payload types above, whose open parts came from JSON) is recorded as the encoding error.
func EventData(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(struct {
			Error string `json:"error"`
		}{err.Error()})
	}
	return b
}
