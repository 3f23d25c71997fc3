package inference

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// Relay forwards requests in a provider's own format (an OpenAI chat completion, an Anthropic
// message) to the provider that serves a catalog model, and relays the answer as the provider
// gave it, streamed or not: what a client written with that provider's SDK sends and expects,
// so that it needs no change but its base URL and key. Unlike Step, nothing is translated, so
// every field the client sends (sampling parameters, images, tool choice, logprobs …) reaches
// the provider. The gateway's part is the rest: the model's name as the provider knows it (a
// fork's checkpoint …), the key to call it with (the member's own for that provider, else the
// platform's), and the call's inference row (tokens, cost, duration, error), as for Step.

// Protocols the relay speaks: a model is reached in the protocol of its adapter.
const (
	ProtocolOpenAI    = models.AdapterOpenAI
	ProtocolAnthropic = models.AdapterAnthropic
)

// DefaultAnthropicVersion is the anthropic-version header sent when the client sends none.
const DefaultAnthropicVersion = "2023-06-01"

// maxRelayedBody bounds a provider's answer that is not streamed, and each line of one that is.
const maxRelayedBody = 64 << 20

// ErrWrongProtocol is returned (wrapped) by Relay when a model is served in another protocol
// than the request's.
var ErrWrongProtocol = errors.New("the model is served in another protocol")

// RelayRequest is one request to relay.
type RelayRequest struct {
	// Protocol is ProtocolOpenAI or ProtocolAnthropic: the format of Body and of the answer.
	Protocol string
	// Body is the request as the client sent it, a JSON object whose "model" names the catalog
	// model; it is sent on with that replaced by the provider's name for the model.
	Body map[string]json.RawMessage
	// Header holds the client's headers; the protocol's own (anthropic-version and
	// anthropic-beta) are sent on, nothing else.
	Header http.Header
	// Capture keeps a successful answer (up to maxRelayedBody bytes) in the result, for the
	// caller to read (ParseAnswer).
	Capture bool
}

// RelayResult is what a relayed call came to, once the provider was asked.
type RelayResult struct {
	// Status is the provider's HTTP status.
	Status int
	Usage  agent.Usage
	// Stream: the answer was server-sent events.
	Stream bool
	// Answer is the provider's successful answer as it came, when the request asked Capture.
	Answer []byte
}

// relayedHeaders are the provider's answer headers passed to the client: its type, and what
// its SDK reads to retry well.
var relayedHeaders = []string{"Content-Type", "Retry-After", "Retry-After-Ms", "X-Should-Retry", "X-Request-Id", "Request-Id"}

// Relay makes the call c describes with req and writes the provider's answer to w. An error
// before the provider was asked (the model's protocol, a key that cannot be opened) is returned
// with nothing written, for the caller to answer; once the provider is asked, its answer —
// success or error — is written as it came, and the call recorded with the tokens it reports,
// whatever happens (a client that hangs up early: error code client_closed, tokens counted).
func (g *Gateway) Relay(ctx context.Context, c Call, req RelayRequest, w http.ResponseWriter) (*RelayResult, error) {
	if c.Model.Adapter != req.Protocol {
		return nil, fmt.Errorf("%w: %s is served over the %s API", ErrWrongProtocol, c.Model.ModelName, c.Model.Adapter)
	}
	up, err := g.upstream(ctx, c)
	if err != nil {
		return nil, err
	}
	body, stream, err := relayBody(req, up.model.ModelName)
	if err != nil {
		return nil, err
	}
	// The provider is asked on a context the client's going away does not end: an answer the
	// client leaves half-read is read to its end all the same, for the tokens it reports, so that
	// a call is never recorded as free (and a spending limit never dodged) by hanging up early.
	upCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), relayTimeout)
	defer cancel()
	httpReq, err := newProviderRequest(upCtx, req, up, body)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	res, err := relayClient.Do(httpReq)
	if err != nil {
		g.record(ctx, c, up, begin, agent.Usage{}, stream, "unreachable")
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &agent.APIError{Provider: req.Protocol, Retryable: true, Message: "the provider cannot be reached", Err: err}
	}
	defer res.Body.Close()
	for _, h := range relayedHeaders {
		if v := res.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(res.StatusCode)
	cw := &clientWriter{w: w, ctx: ctx}
	if req.Capture && res.StatusCode < 300 {
		cw.capture = new(bytes.Buffer)
	}
	var usage agent.Usage
	var rerr error
	if stream && res.StatusCode < 300 {
		usage, rerr = relayStream(res.Body, cw, req.Protocol)
	} else {
		usage, rerr = relayWhole(res.Body, cw, req.Protocol)
	}
	code := ""
	switch {
	case res.StatusCode >= 300:
		code = fmt.Sprintf("http_%d", res.StatusCode)
	case rerr != nil:
		code = "bad_response"
	case cw.gone:
		code = "client_closed"
	}
	g.record(ctx, c, up, begin, usage, stream, code)
	out := &RelayResult{Status: res.StatusCode, Usage: usage, Stream: stream}
	if cw.capture != nil && rerr == nil {
		out.Answer = cw.capture.Bytes()
	}
	return out, nil
}

// relayTimeout bounds one relayed call, whoever waits for it.
const relayTimeout = 30 * time.Minute

// clientWriter writes to the client until it goes away (its request ended, or a write failed),
// then drops what follows: the answer is still read to its end, for its usage.
type clientWriter struct {
	w    http.ResponseWriter
	ctx  context.Context
	gone bool
	// capture, when set, keeps what is written, up to maxRelayedBody bytes.
	capture *bytes.Buffer
}

func (c *clientWriter) Write(p []byte) (int, error) {
	if c.capture != nil && c.capture.Len()+len(p) <= maxRelayedBody {
		c.capture.Write(p)
	}
	if !c.gone && c.ctx.Err() != nil {
		c.gone = true
	}
	if !c.gone {
		if _, err := c.w.Write(p); err != nil {
			c.gone = true
		}
	}
	return len(p), nil
}

func (c *clientWriter) flush() {
	if !c.gone {
		if http.NewResponseController(c.w).Flush() != nil {
			c.gone = true
		}
	}
}

// relayClient calls providers: no overall timeout (an answer may stream for many minutes; the
// request's context ends it), but a connection and its first answer byte within bounds.
var relayClient = &http.Client{Transport: &http.Transport{
	Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 32,
	IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 10 * time.Minute,
}}

// relayBody is the request's body for the provider, with the model's name replaced, and
// whether the answer is to stream. An OpenAI stream is asked to end with its usage, which the
// gateway needs to price the call (its SDKs read the extra chunk as they should).
func relayBody(req RelayRequest, upstreamModel string) ([]byte, bool, error) {
	body := make(map[string]json.RawMessage, len(req.Body)+1)
	for k, v := range req.Body {
		body[k] = v
	}
	name, _ := json.Marshal(upstreamModel)
	body["model"] = name
	var stream bool
	if raw, ok := body["stream"]; ok {
		if err := json.Unmarshal(raw, &stream); err != nil {
			return nil, false, fmt.Errorf("%w: stream must be true or false", errBadRequest)
		}
	}
	if stream && req.Protocol == ProtocolOpenAI {
		opts := map[string]json.RawMessage{}
		if raw, ok := body["stream_options"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &opts); err != nil {
				return nil, false, fmt.Errorf("%w: stream_options must be an object", errBadRequest)
			}
		}
		opts["include_usage"] = json.RawMessage("true")
		body["stream_options"], _ = json.Marshal(opts)
	}
	b, err := json.Marshal(body)
	return b, stream, err
}

// errBadRequest marks a request the client must change (IsBadRequest).
var errBadRequest = errors.New("bad request")

// IsBadRequest reports whether Relay refused the request itself as malformed.
func IsBadRequest(err error) bool { return errors.Is(err, errBadRequest) }

// newProviderRequest is the HTTP request to the provider, authenticated with up's key.
func newProviderRequest(ctx context.Context, req RelayRequest, up *upstream, body []byte) (*http.Request, error) {
	base := strings.TrimRight(up.model.BaseURL, "/")
	var url string
	switch req.Protocol {
	case ProtocolOpenAI:
		url = strings.TrimRight(cmp.Or(base, agent.DefaultOpenAIBaseURL), "/") + "/chat/completions"
	default:
		url = strings.TrimRight(cmp.Or(base, agent.DefaultAnthropicBaseURL), "/") + "/v1/messages"
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	key := up.key()
	switch req.Protocol {
	case ProtocolOpenAI:
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
	default:
		if key != "" {
			r.Header.Set("X-Api-Key", key)
		}
		r.Header.Set("Anthropic-Version", cmp.Or(req.Header.Get("Anthropic-Version"), DefaultAnthropicVersion))
		if beta := req.Header.Get("Anthropic-Beta"); beta != "" {
			r.Header.Set("Anthropic-Beta", beta)
		}
	}
	return r, nil
}

// relayWhole copies an answer that is not streamed and reads its usage.
func relayWhole(body io.Reader, w *clientWriter, protocol string) (agent.Usage, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxRelayedBody+1))
	if err == nil && len(b) > maxRelayedBody {
		err = fmt.Errorf("an answer over %d bytes", maxRelayedBody)
		b = b[:maxRelayedBody]
	}
	w.Write(b) //nolint:errcheck // a client gone is noted by the writer
	var u providerUsage
	if jerr := json.Unmarshal(b, &u); err == nil && jerr != nil {
		err = jerr
	}
	return u.usage(protocol), err
}

// relayStream copies a server-sent-events answer line by line, flushing each event as it
// ends, and reads the usage its events report.
func relayStream(body io.Reader, w *clientWriter, protocol string) (agent.Usage, error) {
	r := bufio.NewReaderSize(body, 64<<10)
	var usage agent.Usage
	for {
		line, err := readLine(r)
		if len(line) > 0 {
			w.Write(line) //nolint:errcheck // a client gone is noted by the writer
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
				var ev providerUsage
				if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil {
					usage = ev.merge(usage, protocol)
				}
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				w.flush()
			}
		}
		if err == io.EOF {
			w.flush()
			return usage, nil
		}
		if err != nil {
			return usage, err
		}
	}
}

// readLine reads one line, at most maxRelayedBody bytes long.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
		if len(line) > maxRelayedBody {
			return line, fmt.Errorf("a streamed line is over %d bytes", maxRelayedBody)
		}
	}
}

// providerUsage is what the gateway reads of an answer, or of one streamed event: the tokens it
// reports, in either protocol's shape.
type providerUsage struct {
	// Usage is an OpenAI answer's or final chunk's (prompt_tokens, completion_tokens), an
	// Anthropic answer's or message_delta event's (input_tokens, output_tokens).
	Usage *tokenCounts `json:"usage"`
	// Message is an Anthropic message_start event's message, whose usage has the input tokens.
	Message *struct {
		Usage *tokenCounts `json:"usage"`
	} `json:"message"`
}

type tokenCounts struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
}

// usage is an answer's usage.
func (p providerUsage) usage(protocol string) agent.Usage {
	return p.merge(agent.Usage{}, protocol)
}

// merge adds what one event reports to the usage so far: an Anthropic stream gives the input
// tokens at its start and the output tokens, cumulative, in its deltas; an OpenAI one gives
// both in its last chunk.
func (p providerUsage) merge(u agent.Usage, protocol string) agent.Usage {
	if p.Message != nil && p.Message.Usage != nil {
		u.InputTokens = max(u.InputTokens, p.Message.Usage.InputTokens)
		u.OutputTokens = max(u.OutputTokens, p.Message.Usage.OutputTokens)
	}
	if p.Usage == nil {
		return u
	}
	if protocol == ProtocolOpenAI {
		return agent.Usage{InputTokens: p.Usage.PromptTokens, OutputTokens: p.Usage.CompletionTokens}
	}
	u.InputTokens = max(u.InputTokens, p.Usage.InputTokens)
	u.OutputTokens = max(u.OutputTokens, p.Usage.OutputTokens)
	return u
}
