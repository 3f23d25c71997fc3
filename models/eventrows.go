package models

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/uptrace/bun"
)

// TraceEvent is one step of a trajectory. (trace_id, seq) is unique: a retried writer that appends
// the same seq again writes nothing. Data is the JSON of the payload type of the event's Kind
// (the payload types below), written by [EventData] and read by [TraceEvent.DecodeData].
type TraceEvent struct {
	bun.BaseModel `bun:"table:trace_events,alias:ev"`
	TraceID       uuid.UUID       `bun:"trace_id,pk,type:uuid"`
	Seq           int             `bun:"seq,pk"`
	ID            string          `bun:"id"`
	Attempt       int             `bun:"attempt"`
	Kind          string          `bun:"kind"`
	Text          string          `bun:"text"`
	ParentID      string          `bun:"parent_id"`
	Data          json.RawMessage `bun:"data"`
	Superseded    bool            `bun:"superseded"`
	StartedAt     time.Time       `bun:"started_at"`
	EndedAt       *time.Time      `bun:"ended_at"`
}

// Trace event kinds.
const (
	EventSystem     = "system_message"
	EventUser       = "user_message"
	EventAssistant  = "assistant_message"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventSetup      = "setup"
	EventEvaluate   = "evaluate"
	EventError      = "error"
)

// DecodeData reads the event's data into v, the payload type of its kind.
func (e *TraceEvent) DecodeData(v any) error {
	if len(e.Data) == 0 {
		return nil
	}
	return json.Unmarshal(e.Data, v)
}

// Images are the images of a tool_result event; other events, and data that does not read as a
// tool result, have none.
func (e *TraceEvent) Images() []agent.Image {
	if e.Kind != EventToolResult {
		return nil
	}
	var d struct {
		Images []agent.Image `json:"images"`
	}
	if e.DecodeData(&d) != nil {
		return nil
	}
	return d.Images
}

// Failed says whether the event is a tool result the environment marked an error.
func (e *TraceEvent) Failed() bool {
	if e.Kind != EventToolResult {
		return false
	}
	var d struct {
		IsError bool `json:"is_error"`
	}
	return e.DecodeData(&d) == nil && d.IsError
}

// TraceLog is one line of an attempt's worker log or its environment's output.
type TraceLog struct {
	bun.BaseModel `bun:"table:trace_logs,alias:tl"`
	TraceID       uuid.UUID `bun:"trace_id,pk,type:uuid"`
	Source        string    `bun:"source,pk"`
	Seq           int       `bun:"seq,pk"`
	Stream        string    `bun:"stream"`
	Line          string    `bun:"line"`
	Time          time.Time `bun:"time"`
}

// SystemEventData is the data of a system_message event (its text is the system prompt).
type SystemEventData struct {
	// Tools are the tools the agent is shown.
	Tools []agent.Tool `json:"tools"`
}

// UserEventData is the data of a user_message event (its text is the prompt).
type UserEventData struct {
	Message agent.Message `json:"message"`
}

// AssistantEventData is the data of an assistant_message event: one model call's answer.
type AssistantEventData struct {
	// Step is the model call's number in the attempt, from 0.
	Step    int           `json:"step"`
	Message agent.Message `json:"message"`
	Usage   agent.Usage   `json:"usage"`
	// Model is the model that answered, as its provider names it.
	Model string `json:"model"`
	// TokensRef names the call's kept tokens (a training policy's: ModelCallTokens.CallID);
	// nil when none were kept.
	TokensRef *uuid.UUID `json:"tokens_ref,omitempty"`
	// Sent is what a brought agent sent the model in this call, kept as the gateway relayed it
	// (nil for the built-in loop, whose requests are the trace's own events, and for a call
	// whose request could not be read).
	Sent *SentRequest `json:"sent,omitempty"`
}

// SentRequest is a brought agent's model call's request, stored against the call before it:
// the messages after the first Kept of the previous call's request, which this one repeated
// unchanged (all of them on the first call), and the tools when they changed. Its conversation is
// rebuilt by [Rebuild], call by call; images are kept in object storage (their Key) as a tool
// result's are, so a request that repeats an image stores nothing new.
type SentRequest struct {
	// Kept is how many leading messages of the previous call's request this one repeated.
	Kept int `json:"kept"`
	// Messages are the rest of this call's, as sent (a system prompt is a system message).
	Messages []agent.Message `json:"messages"`
	// Tools are the tools offered, when they are not the previous call's (absent: the same).
	Tools *[]agent.Tool `json:"tools,omitempty"`
}

// SentLog is what a brought agent's model calls sent so far, for storing each call's request
// against the one before it. The zero value is a log of no calls.
type SentLog struct {
	msgs    []string // the previous request's messages, each as JSON (an image by its digest)
	tools   string
	started bool
}

// Next is the SentRequest of a call whose request holds msgs and tools, stored against the
// previous call's; the log then holds this one.
func (l *SentLog) Next(msgs []agent.Message, tools []agent.Tool) *SentRequest {
	enc := make([]string, len(msgs))
	for i, m := range msgs {
		b, _ := json.Marshal(m) // an image's bytes are left out; its digest stays
		enc[i] = string(b)
	}
	tb, _ := json.Marshal(tools)
	kept := 0
	for kept < len(enc) && kept < len(l.msgs) && enc[kept] == l.msgs[kept] {
		kept++
	}
	out := &SentRequest{Kept: kept, Messages: append([]agent.Message{}, msgs[kept:]...)}
	if !l.started || string(tb) != l.tools {
		out.Tools = &tools
	}
	l.msgs, l.tools, l.started = enc, string(tb), true
	return out
}

// Rebuild is a call's whole request from the previous call's (prev, and its tools) and what
// this one sent.
func (s *SentRequest) Rebuild(prev []agent.Message, tools []agent.Tool) ([]agent.Message, []agent.Tool) {
	msgs := append(slices.Clone(prev[:min(s.Kept, len(prev))]), s.Messages...)
	if s.Tools != nil {
		tools = *s.Tools
	}
	return msgs, tools
}

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
	// Refused: the call was turned away before any tool ran (a tool the agent was not offered,
	// such as the hidden setup and evaluate dispatchers; arguments that are no JSON object; a
	// call the environment refused at the protocol level). IsError is true too.
	Refused bool `json:"refused,omitempty"`
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

// EvaluationResult is how an attempt was scored: the trace's evaluation_result. Reward is the
// mean of the evaluate calls' rewards; the rest comes from the last of them, as the
// environment's evaluator returned it (envserver.EvaluationResult is the same shape).
type EvaluationResult struct {
	Reward float64 `json:"reward"`
	Done   bool    `json:"done"`
	// Content is the evaluator's own explanation of the score.
	Content string `json:"content"`
	// Info is the evaluator's details, an object of the environment's own shape (null without).
	Info map[string]any `json:"info"`
	// Reason says why no reward could be read (a failed evaluate call, no reward field, a task
	// without evaluation).
	Reason string `json:"reason,omitempty"`
}

// Turn is what an event adds to the conversation a model is sent, as the engine rebuilds it
// before each model call (and an export writes it): a system event sets the system prompt and
// the tools; a user message, an assistant message and a tool result each add their message. ok
// is false for the other kinds (setup, tool calls — the assistant message carries them —,
// evaluate).
type Turn struct {
	// System and Tools are set by a system event.
	System *string
	Tools  []agent.Tool
	// Message is the turn's message, for the other kinds; Step is an assistant message's step.
	Message *agent.Message
	Step    int
}

// Turn reads what e adds to the conversation.
func (e *TraceEvent) Turn() (t Turn, ok bool, err error) {
	switch e.Kind {
	case EventSystem:
		var d SystemEventData
		if err := e.DecodeData(&d); err != nil {
			return t, false, fmt.Errorf("the tools at seq %d: %w", e.Seq, err)
		}
		text := e.Text
		return Turn{System: &text, Tools: d.Tools}, true, nil
	case EventUser, EventToolResult:
		// Both payloads carry the turn as their message.
		var d UserEventData
		if err := e.DecodeData(&d); err != nil {
			return t, false, fmt.Errorf("the message at seq %d: %w", e.Seq, err)
		}
		return Turn{Message: &d.Message}, true, nil
	case EventAssistant:
		var d AssistantEventData
		if err := e.DecodeData(&d); err != nil {
			return t, false, fmt.Errorf("the answer at seq %d: %w", e.Seq, err)
		}
		return Turn{Message: &d.Message, Step: d.Step}, true, nil
	}
	return t, false, nil
}
