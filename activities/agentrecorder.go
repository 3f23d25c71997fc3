package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/agentport"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
)

// agentRecorder makes the calls a brought agent sends through its port and writes them to the
// trace: each model call as an assistant event, each tool call as a tool_call and a tool_result
// event, in the order they are answered.
type agentRecorder struct {
	a   *Activities
	try TryInput
	le  *liveEnv
	r   *runFor
	gw  *inference.Gateway

	mu   sync.Mutex
	next int
	// pending are the tool calls of the latest answer not yet seen through MCP, and step its
	// step: a tool call is recorded under the call id the model gave it when it matches one.
	pending []agent.ToolCall
	step    int
	unnamed int
	// sent holds the previous model call's request, which the next call's is stored against.
	sent models.SentLog
}

// append writes events at the next seqs, in order.
func (rec *agentRecorder) append(ctx context.Context, evs ...models.TraceEvent) error {
	for i := range evs {
		evs[i].Seq = rec.next
		rec.next++
	}
	return rec.a.appendTraceEvents(context.WithoutCancel(ctx), rec.le, evs)
}

// Model relays a model call to the launch's model through the gateway (metered, priced, with
// the launcher's own key when bound) and records the answer.
func (rec *agentRecorder) Model(ctx context.Context, step int, protocol string, body map[string]json.RawMessage, header http.Header, w http.ResponseWriter) error {
	m := rec.r.model
	var name string
	json.Unmarshal(body["model"], &name) //nolint:errcheck // checked below
	if name != m.ModelName && name != m.ID.String() {
		return &agentport.BadRequest{Message: fmt.Sprintf("model %q: this attempt may call %s only", name, m.ModelName)}
	}
	if m.Adapter != protocol {
		return &agentport.BadRequest{Message: fmt.Sprintf("%s is served over the %s API: call it at its base URL", m.ModelName, m.Adapter)}
	}
	// A call its job may no longer pay for is never made, and ends the agent's run.
	if rec.r.budgeted {
		if b, err := rec.a.billing().TraceBudget(ctx, rec.try.TraceID); err != nil {
			return err
		} else if b.Reached() {
			return &agentport.Stop{Kind: "budget_exceeded", Message: b.String() + ": this attempt makes no more model calls, and stops"}
		}
	}
	body["model"], _ = json.Marshal(m.ModelName)
	sampling := ""
	if m.TrainingPolicy && protocol == inference.ProtocolOpenAI {
		// A training policy's call is asked for its tokens, as the built-in loop's are: the
		// agent's answer carries them too (fields its SDK leaves alone), and they are kept,
		// streamed or not.
		body["logprobs"], body["return_token_ids"] = json.RawMessage("true"), json.RawMessage("true")
		sampling = samplingOf(body)
	}
	req, rerr := inference.ParseRequest(protocol, body)
	if rerr != nil {
		rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: its request could not be read for the trace: %v", step, rerr)
	}
	call := inference.Call{Model: m, TeamID: rec.r.trace.TeamID, UserID: rec.r.launched.user, APIKeyID: rec.r.launched.key,
		TraceID: &rec.r.trace.ID, Route: billing.RouteAgent}
	started := time.Now().UTC()
	res, err := rec.gw.Relay(ctx, call, inference.RelayRequest{Protocol: protocol, Body: body, Header: header, Capture: true}, w)
	if err != nil {
		return err
	}
	if res.Status >= 300 {
		rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: the provider answered %d", step, res.Status)
		return nil
	}
	out, perr := inference.ParseAnswer(protocol, res.Stream, res.Answer)
	if perr != nil {
		rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: the answer could not be read for the trace: %v", step, perr)
		out = &agent.StepResult{Message: agent.Message{Role: agent.RoleAssistant}}
	}
	var tokensRef *uuid.UUID
	if sampling != "" {
		// Kept even when the agent has hung up: its answer was read to the end, and its event is
		// written all the same. A stream's come in pieces, put together in order.
		tokensOf := agent.OpenAITokensOf
		if res.Stream {
			tokensOf = inference.OpenAIStreamTokens
		}
		if t, terr := tokensOf(res.Answer, sampling); terr != nil {
			rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: its tokens could not be read: %v", step, terr)
		} else if tokensRef, terr = rec.a.keepTokens(context.WithoutCancel(ctx), rec.try.TraceID, m.ModelName, t); terr != nil {
			rec.a.log().WarnContext(ctx, "keep an agent's model call's tokens", "trace", rec.try.TraceID, "error", terr)
		}
	}
	data := models.AssistantEventData{Step: step, Message: out.Message, Usage: res.Usage, Model: out.Model, TokensRef: tokensRef}
	end := time.Now().UTC()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.pending, rec.step = out.Message.ToolCalls, step
	if rerr == nil {
		// Stored against the request of the call recorded before it, whatever order calls made
		// at once were sent in: what the trace rebuilds is what each call sent.
		data.Sent = rec.sent.Next(req.Messages, req.Tools)
		for i, m := range data.Sent.Messages {
			data.Sent.Messages[i].Images = rec.a.keepImages(context.WithoutCancel(ctx), rec.try.TraceID, m.Images)
		}
	}
	ev := rec.a.event(rec.try, 0, models.EventAssistant, out.Message.Content, data)
	ev.StartedAt, ev.EndedAt = started, &end
	if err := rec.append(ctx, ev); err != nil {
		rec.a.log().WarnContext(ctx, "record an agent's model call", "trace", rec.try.TraceID, "error", err)
		// The next call's request is then stored whole, not against one the trace lacks.
		rec.sent = models.SentLog{}
	}
	return nil
}

// CallTool makes a tool call the agent sent through MCP in the environment, and records it
// under the call id of the model's matching tool call when there is one.
func (rec *agentRecorder) CallTool(ctx context.Context, name string, args map[string]any) (*agent.ToolResult, error) {
	rec.mu.Lock()
	step, id := rec.step, ""
	for i, tc := range rec.pending {
		if tc.Name == name {
			id = tc.ID
			rec.pending = append(rec.pending[:i:i], rec.pending[i+1:]...)
			break
		}
	}
	if id == "" {
		rec.unnamed++
		id = fmt.Sprintf("mcp-%d", rec.unnamed)
	}
	rec.mu.Unlock()
	started := time.Now().UTC()
	tc := agent.ToolCall{ID: id, Name: name, Arguments: args}
	res, err := rec.le.env.CallAgentTool(ctx, rec.le.tools, tc)
	if err != nil {
		return nil, err
	}
	call, result := rec.a.toolEvents(ctx, rec.try, 0, step, tc, res, started, time.Now().UTC())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := rec.append(ctx, call, result); err != nil {
		rec.a.log().WarnContext(ctx, "record an agent's tool call", "trace", rec.try.TraceID, "error", err)
	}
	return res, nil
}

// lineTail keeps the last lines of a stream.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func newLineTail(n int) *lineTail { return &lineTail{max: n} }

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// quote is the tail for an error message: "; its stderr ended: …", or "" when it wrote none.
func (t *lineTail) quote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ended:\n" + strings.Join(t.lines, "\n")
}

// samplingOf is the sampling parameters of a brought agent's chat completion request, as a JSON
// object: every field it set but the conversation, the tools and the model (top_k, min_p, stop,
// n and the like included), and the token fields Proctor added.
func samplingOf(body map[string]json.RawMessage) string {
	out := map[string]json.RawMessage{}
	for k, v := range body {
		switch k {
		case "messages", "tools", "tool_choice", "model", "stream", "stream_options", "user", "metadata":
		default:
			out[k] = v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}
