package activities

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// ModelStepInput names one model step of a try.
type ModelStepInput struct {
	TraceID uuid.UUID `json:"trace_id"`
	Attempt int       `json:"attempt"`
	Step    int       `json:"step"`
}

// ModelStepResult says whether the model answered without tool calls, and where its answer is.
type ModelStepResult struct {
	Done      bool `json:"done"`
	ToolCalls int  `json:"tool_calls"`
	// Seq is the answer's event: the ToolStep of this step reads its calls there.
	Seq int `json:"seq"`
}

// ModelStep makes one inference call. Any worker can run it: the conversation is kept per try in
// a cache on the worker and brought up to date with only the events written since it last saw
// the trace (tool results); a worker that has not seen the try (a failover) rebuilds it from
// the store. A retried ModelStep that already wrote its answer returns it without calling the
// model again.
//
// It heartbeats while the model thinks, so that a cancelled attempt's call is abandoned within
// seconds (the cancel arrives with a heartbeat's answer) instead of running, and billing, on.
func (a *Activities) ModelStep(ctx context.Context, in ModelStepInput) (ModelStepResult, error) {
	stop := keepAlive(ctx)
	defer stop()
	conv, err := a.conversations().open(ctx, a, in.TraceID, in.Attempt)
	if err != nil {
		return ModelStepResult{}, err
	}
	defer conv.mu.Unlock()
	if ans, ok := conv.answers[in.Step]; ok {
		return ans, nil
	}
	// A call its job may no longer pay for is never made.
	if conv.budgeted {
		if err := a.checkBudget(ctx, in.TraceID); err != nil {
			return ModelStepResult{}, err
		}
	}
	req, err := a.withImages(ctx, conv.req)
	if err != nil {
		return ModelStepResult{}, err
	}
	started := time.Now().UTC()
	out, err := conv.model.Step(ctx, req)
	if err != nil {
		var apiErr *agent.APIError
		if errors.As(err, &apiErr) && apiErr.Unreachable {
			// A model registered at the wrong address fails the attempt in seconds, not after
			// the run's whole timeout of retries.
			if n := activity.GetInfo(ctx).Attempt; n >= unreachableTries {
				return ModelStepResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s unreachable at %s: %s (%d tries)",
					conv.modelName, conv.modelURL, apiErr.Message, n), ErrModel, nil)
			}
			a.workerLog(ctx, in.TraceID, "model step %d: model %s unreachable at %s: %s (retrying)", in.Step, conv.modelName, conv.modelURL, apiErr.Message)
			return ModelStepResult{}, err
		}
		if errors.As(err, &apiErr) && apiErr.Retryable {
			a.workerLog(ctx, in.TraceID, "model step %d: %v (retrying)", in.Step, err)
			return ModelStepResult{}, err
		}
		return ModelStepResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model step %d: %v", in.Step, err), ErrModel, err)
	}
	seq, err := a.nextSeq(ctx, in.TraceID)
	if err != nil {
		return ModelStepResult{}, err
	}
	var tokensRef *uuid.UUID
	if out.Tokens != nil {
		if tokensRef, err = a.keepTokens(ctx, in.TraceID, conv.modelName, out.Tokens); err != nil {
			return ModelStepResult{}, err
		}
	}
	ev := a.event(TryInput{TraceID: in.TraceID, Attempt: in.Attempt}, seq, models.EventAssistant, out.Message.Content, models.AssistantEventData{
		Step: in.Step, Message: out.Message, Usage: out.Usage, Model: out.Model, TokensRef: tokensRef,
	})
	ev.StartedAt = started
	end := time.Now().UTC()
	ev.EndedAt = &end
	if err := a.rollouts().AppendTraceEvents(ctx, []models.TraceEvent{ev}); err != nil {
		return ModelStepResult{}, err
	}
	// The next step reads the event back like any other, which keeps one code path for the
	// conversation whether this worker wrote the answer or another did.
	return ModelStepResult{Done: out.Done, ToolCalls: len(out.Message.ToolCalls), Seq: seq}, nil
}

// keepTokens keeps a training policy's call's tokens beside the trace (never in its events, nor
// in a workflow's history) and returns the reference its assistant event names them by. A
// server that answered without token ids (it does not know return_token_ids) is said once per
// model on this worker.
func (a *Activities) keepTokens(ctx context.Context, traceID uuid.UUID, model string, t *agent.Tokens) (*uuid.UUID, error) {
	callID := uuid.New()
	if err := a.llms().RecordModelCallTokens(ctx, models.ModelCallTokens{TraceID: traceID, CallID: callID, PromptTokenIDs: t.PromptTokenIDs,
		CompletionTokenIDs: t.CompletionTokenIDs, Logprobs: t.Logprobs, Sampling: t.Sampling}); err != nil {
		return nil, err
	}
	if t.PromptTokenIDs == "" && t.CompletionTokenIDs == "" && a.sayOnce("no token ids: "+model) {
		a.log().WarnContext(ctx, "a training policy's server returned no token ids: it may not know return_token_ids", "model", model, "trace", traceID)
		a.workerLog(ctx, traceID, "model %s: asked for token ids (a training policy), its server returned none", model)
	}
	return &callID, nil
}

// sayOnce reports whether what is about key has not been said yet on this worker, and marks it
// said.
func (a *Activities) sayOnce(key string) bool {
	_, said := a.saidOnce.LoadOrStore(key, true)
	return !said
}

// unreachableTries is how many times a model step calls a model it cannot connect to before
// the attempt ends in error: with the step's retry policy (1 s, doubling), about 7 s in all.
const unreachableTries = 4

// conversation is one try's model-facing state on a worker.
type conversation struct {
	mu        sync.Mutex
	attempt   int
	lastSeq   int
	req       agent.StepRequest
	modelName string
	// modelURL is where the model is served, as errors name it: its base URL without
	// credentials or query, or its provider's default endpoint.
	modelURL string
	model    agent.Model
	// budgeted: the job has a ceiling, checked before each call.
	budgeted bool
	// answers are the assistant events seen, by step, for retried steps.
	answers map[int]ModelStepResult
	elem    *list.Element
}

// conversations caches the conversations of the tries this worker has stepped, most recently
// used first, up to a bound; an evicted one is rebuilt from the store if needed again.
type conversations struct {
	mu    sync.Mutex
	max   int
	byID  map[uuid.UUID]*conversation
	order *list.List
}

const maxCachedConversations = 1024

func (a *Activities) conversations() *conversations {
	a.convOnce.Do(func() {
		a.convs = &conversations{max: maxCachedConversations, byID: map[uuid.UUID]*conversation{}, order: list.New()}
	})
	return a.convs
}

// open returns the try's conversation, locked and brought up to date with the store.
func (cs *conversations) open(ctx context.Context, a *Activities, traceID uuid.UUID, attempt int) (*conversation, error) {
	cs.mu.Lock()
	c := cs.byID[traceID]
	if c == nil || c.attempt != attempt {
		if c != nil {
			cs.order.Remove(c.elem)
		}
		c = &conversation{attempt: attempt, lastSeq: -1, answers: map[int]ModelStepResult{}}
		c.elem = cs.order.PushFront(traceID)
		cs.byID[traceID] = c
		for cs.order.Len() > cs.max {
			oldest := cs.order.Back()
			cs.order.Remove(oldest)
			delete(cs.byID, oldest.Value.(uuid.UUID))
		}
	} else {
		cs.order.MoveToFront(c.elem)
	}
	cs.mu.Unlock()

	c.mu.Lock()
	if err := c.catchUp(ctx, a, traceID); err != nil {
		c.mu.Unlock()
		cs.forget(traceID, c)
		return nil, err
	}
	return c, nil
}

// forget drops a conversation (a try that ended, or one whose state could not be read).
func (cs *conversations) forget(traceID uuid.UUID, c *conversation) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cur := cs.byID[traceID]; cur != nil && (c == nil || cur == c) {
		cs.order.Remove(cur.elem)
		delete(cs.byID, traceID)
	}
}

// catchUp reads the events written since the conversation last looked, and on first use the
// model the trace runs on.
func (c *conversation) catchUp(ctx context.Context, a *Activities, traceID uuid.UUID) error {
	if c.model == nil {
		r, err := a.load(ctx, traceID)
		if err != nil {
			return err
		}
		if r.model == nil {
			return temporal.NewNonRetryableApplicationError("the trace names no model", ErrModel, nil)
		}
		m, err := a.gatewayModel(ctx, r)
		if err != nil {
			return err
		}
		c.model, c.modelName, c.modelURL, c.budgeted = m, r.model.ModelName, endpoint(r.model.Provider, r.model.BaseURL), r.budgeted
	}
	evs, err := a.rollouts().TraceEvents(ctx, traceID, c.lastSeq, false)
	if err != nil {
		return err
	}
	for _, e := range evs {
		c.lastSeq = e.Seq
		if e.Attempt != c.attempt {
			continue
		}
		turn, ok, err := e.Turn()
		if err != nil {
			return fmt.Errorf("rebuild conversation: %w", err)
		}
		switch {
		case !ok:
		case turn.System != nil:
			c.req.System, c.req.Tools = *turn.System, turn.Tools
		default:
			c.req.Messages = append(c.req.Messages, *turn.Message)
			if e.Kind == models.EventAssistant {
				m := turn.Message
				c.answers[turn.Step] = ModelStepResult{Done: len(m.ToolCalls) == 0, ToolCalls: len(m.ToolCalls), Seq: e.Seq}
			}
		}
	}
	return nil
}

// endpoint is a model's base URL as an error may show it (its user info and query dropped), or
// its provider's default endpoint when it has none.
func endpoint(provider, base string) string {
	if base == "" {
		return provider + "'s default endpoint"
	}
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "its base URL (unparsable)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
