package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of the conversation. The conversation is rebuilt from stored trace
// events before every model call, so a Message carries everything an adapter needs and nothing
// provider-specific.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string `json:"role"`
	// Content is the text of the turn; for a tool message, the tool result's text.
	Content string `json:"content,omitempty"`
	// Images are, on a tool message, the tool result's images, shown to the model with it.
	Images []Image `json:"images,omitempty"`
	// ToolCalls are the calls an assistant message asks for, in order.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, on a tool message, the ID of the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a tool message whose call failed (a tool error the agent may correct).
	IsError bool `json:"is_error,omitempty"`
}

// ToolCall is a call of a visible tool requested by the model.
type ToolCall struct {
	// ID is the provider's id of the call; tool messages answer it by ToolCallID.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Arguments are the call's arguments, a JSON object.
	Arguments map[string]any `json:"arguments,omitempty"`
	// InvalidArguments holds the model's raw arguments when they were not a JSON object (and
	// Arguments is then nil). The call must not reach the environment; [Env.CallAgentTool]
	// answers it with a tool error that quotes the problem, so the model can correct itself.
	InvalidArguments string `json:"invalid_arguments,omitempty"`
}

// StepRequest is the input of one model call.
type StepRequest struct {
	// System is the system prompt ([SystemPrompt] builds it from the task's and the agent
	// config's).
	System string `json:"system,omitempty"`
	// Messages is the conversation so far, oldest first.
	Messages []Message `json:"messages"`
	// Tools are the tools the model may call (see [Env.Tools] and [FilterTools]).
	Tools []Tool `json:"tools,omitempty"`
	// MaxTokens bounds the answer's length; 0 leaves it to the adapter's configuration.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// answered counts the model's answers in the conversation so far (its assistant messages) and
// the tool calls they made: what the built-in agents that keep no state (the oracle, the replay
// model, the random and tamper agents) find their next step by.
func (r StepRequest) answered() (answers, calls int) {
	for _, m := range r.Messages {
		if m.Role == RoleAssistant {
			answers++
			calls += len(m.ToolCalls)
		}
	}
	return answers, calls
}

// StepResult is the outcome of one model call.
type StepResult struct {
	// Message is the model's answer, role "assistant".
	Message Message `json:"message"`
	// Done is true when the answer has no tool calls: it is the agent's final answer.
	Done bool `json:"done"`
	// Usage counts the tokens of this call.
	Usage Usage `json:"usage"`
	// Model is the model that answered, as the provider names it.
	Model string `json:"model,omitempty"`
	// StopReason is the provider's reason for ending the answer ("stop", "tool_calls",
	// "length", "end_turn", "tool_use", "max_tokens", ...), for the trace.
	StopReason string `json:"stop_reason,omitempty"`
	// Tokens is what the server returned of the call's tokens, when they were asked for
	// (OpenAIConfig.CaptureTokens); nil otherwise. It is never encoded with the result: token
	// arrays are kept beside the trace, not in a workflow's history.
	Tokens *Tokens `json:"-"`
}

// Tokens is what an OpenAI-compatible server (vLLM, SGLang) returned of one call's tokens, each
// field the JSON text of the answer's own value, byte for byte, or empty where it returned none.
type Tokens struct {
	// PromptTokenIDs is the answer's prompt_token_ids: the prompt as the model saw it.
	PromptTokenIDs string
	// CompletionTokenIDs is the first choice's token_ids: the tokens the model sampled.
	CompletionTokenIDs string
	// Logprobs is the first choice's logprobs: each sampled token's log-probability.
	Logprobs string
	// Sampling is the sampling parameters the request carried, as a JSON object.
	Sampling string
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Model makes one inference call. Implementations are stateless and safe for concurrent use:
// everything a call needs is in the request.
type Model interface {
	Step(ctx context.Context, req StepRequest) (*StepResult, error)
}

// ErrBadResponse is wrapped by errors for provider answers that arrived (2xx) but cannot be
// used, such as a completion without choices. Such errors are not [APIError]s and are not
// retryable: the same request would most likely get the same answer.
var ErrBadResponse = errors.New("unusable model response")

// APIError is a failed model call: the provider answered with an error status, or could not be
// reached. Callers branch on Retryable: the adapters never retry on their own.
type APIError struct {
	// Provider is "openai" or "anthropic".
	Provider string
	// Status is the HTTP status, or 0 when no response arrived (a network error).
	Status int
	// Retryable is true for 408, 409, 429, 5xx and network errors (unless the provider's
	// x-should-retry header says otherwise), false for the rest (400, 401, 403, 404, 422...).
	Retryable bool
	// RetryAfter is the delay the provider asked for (retry-after-ms or retry-after), or 0.
	RetryAfter time.Duration
	// Unreachable is true when no connection could be made at all (refused, no such host, no
	// route, a dial that timed out, a certificate that does not verify): a model registered at
	// the wrong address, which a few quick retries tell apart from a server restarting.
	Unreachable bool
	// Message is the provider's error message, without credentials or request URLs.
	Message string
	// Err is the underlying error of the SDK or the network.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s API", e.Provider)
	if e.Status != 0 {
		fmt.Fprintf(&b, " %d", e.Status)
	} else if e.Unreachable {
		b.WriteString(" unreachable")
	} else {
		b.WriteString(" network error")
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Retryable {
		b.WriteString(" (retryable)")
	}
	return b.String()
}

func (e *APIError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is (or wraps) an [APIError] worth retrying.
func IsRetryable(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Retryable
}

// retryableStatus says which statuses are worth another try: timeouts, conflicts (OpenAI
// uses 409 for transient lock contention), rate limits and server errors (Anthropic's 529
// overloaded included).
func retryableStatus(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooManyRequests:
		return true
	case status >= 500 && status <= 599:
		return true
	}
	return false
}

// httpAPIError builds the APIError of an error response. res may carry the body the SDK read
// and put back.
func httpAPIError(provider string, res *http.Response, status int, err error) *APIError {
	e := &APIError{Provider: provider, Status: status, Retryable: retryableStatus(status), Err: err}
	if res == nil {
		e.Message = http.StatusText(status)
		return e
	}
	// The providers' servers say when their status alone misleads (a 409 that will not go
	// away, a 400 that will); their own SDKs obey this header, and so do we.
	switch strings.ToLower(res.Header.Get("x-should-retry")) {
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	e.RetryAfter = retryAfter(res.Header, time.Now())
	if res.Body != nil {
		body, _ := readLimited(res)
		e.Message = errorMessage(body)
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// networkAPIError wraps an error that left no HTTP response: a refused connection, a reset, a
// timeout of the request itself. These are worth another try; one that made no connection at
// all is marked Unreachable, and its message is the cause alone (the SDK's prefix names the
// request URL).
func networkAPIError(provider string, err error) *APIError {
	e := &APIError{Provider: provider, Retryable: true, Message: err.Error(), Err: err}
	if why, ok := unreachable(err); ok {
		e.Unreachable, e.Message = true, why
	}
	return e
}

// unreachable says whether err means that no connection to the provider could be made, and
// why, in a few words.
func unreachable(err error) (string, bool) {
	var (
		dns     *net.DNSError
		op      *net.OpError
		cert    *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
	)
	switch {
	case errors.As(err, &dns):
		return "no such host " + dns.Name, dns.IsNotFound || !dns.IsTemporary
	case errors.As(err, &cert), errors.As(err, &unknown), errors.As(err, &host):
		return "its TLS certificate does not verify", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused", true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host", true
	case errors.As(err, &op) && op.Op == "dial":
		if op.Timeout() {
			return "the connection timed out", true
		}
		return op.Err.Error(), true
	}
	return "", false
}

// callError turns an SDK error into what Step returns: the caller's own cancellation as it is
// (not a provider failure, and not to be retried), anything else as an APIError.
func callError(ctx context.Context, provider string, err error, status func(error) (int, *http.Response, bool)) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s step: %w", provider, ctxErr)
	}
	if code, res, ok := status(err); ok {
		return httpAPIError(provider, res, code, err)
	}
	return networkAPIError(provider, err)
}

func readLimited(res *http.Response) ([]byte, error) {
	return io.ReadAll(io.LimitReader(res.Body, 64<<10))
}

// errorMessage digs the human-readable message out of an error body in the shapes the
// OpenAI-compatible servers use: {"error": {"message"}}, {"error": "..."}, {"message"} (vLLM),
// {"detail"} (FastAPI-based servers); else the body itself, shortened.
func errorMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message any             `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		if len(v.Error) > 0 {
			var inner struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			}
			var s string
			switch {
			case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
				return inner.Message
			case json.Unmarshal(v.Error, &s) == nil && s != "":
				return s
			}
		}
		for _, m := range []any{v.Message, v.Detail} {
			if s, ok := m.(string); ok && s != "" {
				return s
			}
		}
	}
	return truncate(string(body), 500)
}

// retryAfter reads the delay a provider asks for: retry-after-ms (OpenAI), then retry-after
// in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary so that the message stays valid UTF-8.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ParseArguments decodes a model's tool-call arguments (an answer's, or one an agent sends back).
// Empty means no arguments; a JSON string that holds an object (some models encode twice) is
// unwrapped. Anything else is reported as the second result, not guessed at.
func ParseArguments(raw string) (map[string]any, string) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" || trimmed == "null" {
		return map[string]any{}, ""
	}
	var inner string
	if json.Unmarshal([]byte(trimmed), &inner) == nil {
		trimmed = strings.TrimSpace(inner)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(trimmed), &args); err != nil || args == nil {
		return nil, raw
	}
	return args, ""
}

// argumentsJSON encodes a tool call's arguments for a provider that wants them as a string.
func argumentsJSON(tc ToolCall) string {
	if tc.Arguments == nil && tc.InvalidArguments != "" {
		// Replaying the model's own malformed text keeps the conversation faithful; the
		// provider accepts any string here.
		return tc.InvalidArguments
	}
	if tc.Arguments == nil {
		return "{}"
	}
	b, err := json.Marshal(tc.Arguments)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// toolResultText is what a model reads for a tool message: the result's text, marked when the
// call failed, since OpenAI-style tool messages have no error flag.
func toolResultText(m Message) string {
	if m.IsError {
		return "Error: " + m.Content
	}
	return m.Content
}

// toolContent splits a tool message's images into those the model is shown and, appended to
// text, a note for each one it is not (an unsupported type, bytes not at hand).
func toolContent(text string, m Message) (string, []Image) {
	var shown []Image
	for _, im := range m.Images {
		if modelCanSee(im) {
			shown = append(shown, im)
			continue
		}
		text = joinLines(text, imageNote(im))
	}
	return text, shown
}

func joinLines(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}
