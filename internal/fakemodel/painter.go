// Package fakemodel serves a scripted stand-in for the model providers' APIs, for tests: the
// providers are third-party services that tests cannot reach.
//
// [Painter] plays the canvas example's copy-color scenario the only way it can be solved: by
// looking. It asks for a screenshot, decodes the PNG it is sent back, reads the color of the
// square in the canvas's top-left corner, and paints the square the prompt asks for in that
// color. It speaks OpenAI chat completions (POST …/chat/completions) and Anthropic messages
// (POST …/messages), and keeps nothing between requests: like a real model it answers from the
// conversation it is sent.
package fakemodel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Painter is the scripted model's server.
type Painter struct {
	// URL is the server's root; OpenAI clients take URL+"/v1", Anthropic clients URL.
	URL string

	palette      map[string]color.RGBA
	systemPrefix string

	mu       sync.Mutex
	requests int
	images   int
	refusals []string
}

// NewPainter starts a Painter that names colors from palette. It refuses (400) any request
// whose system prompt does not start with systemPrefix, so a test cannot pass unless the
// environment's instructions opened the system prompt. The server stops with the test.
func NewPainter(t testing.TB, palette map[string]color.RGBA, systemPrefix string) *Painter {
	p := &Painter{palette: palette, systemPrefix: systemPrefix}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Requests counts the model calls answered, Images the images they carried, and Refusals the
// reasons of those refused.
func (p *Painter) Requests() int { p.mu.Lock(); defer p.mu.Unlock(); return p.requests }
func (p *Painter) Images() int   { p.mu.Lock(); defer p.mu.Unlock(); return p.images }
func (p *Painter) Refusals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refusals...)
}

// conversation is what the Painter reads of a request, whichever provider's shape it came in.
type conversation struct {
	system  string
	prompt  string // the first user text
	results int    // tool results so far
	images  []picture
}

type picture struct {
	mimeType string
	data     []byte
}

// call is the Painter's next move: a tool call, or (name empty) a final answer.
type call struct {
	name string
	args map[string]any
	text string
}

func (p *Painter) serve(w http.ResponseWriter, r *http.Request) {
	anthropic := strings.HasSuffix(r.URL.Path, "/messages")
	if r.Method != http.MethodPost || (!anthropic && !strings.HasSuffix(r.URL.Path, "/chat/completions")) {
		p.refuse(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
		return
	}
	var conv conversation
	var err error
	if anthropic {
		conv, err = readAnthropic(r)
	} else {
		conv, err = readOpenAI(r)
	}
	if err != nil {
		p.refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	if !strings.HasPrefix(conv.system, p.systemPrefix) {
		p.refuse(w, http.StatusBadRequest, fmt.Sprintf("the system prompt %q does not open with %q", conv.system, p.systemPrefix))
		return
	}
	next, err := p.decide(conv)
	if err != nil {
		p.refuse(w, http.StatusBadRequest, err.Error())
		return
	}
	p.mu.Lock()
	p.requests++
	p.images += len(conv.images)
	n := p.requests
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if anthropic {
		_ = json.NewEncoder(w).Encode(anthropicReply(n, next))
	} else {
		_ = json.NewEncoder(w).Encode(openAIReply(n, next))
	}
}

func (p *Painter) refuse(w http.ResponseWriter, status int, msg string) {
	p.mu.Lock()
	p.refusals = append(p.refusals, msg)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
}

// squareAsked reads the copy-color prompt's square: its side and top-left corner.
var squareAsked = regexp.MustCompile(`side (\d+) pixels, whose top-left corner is at \((\d+), (\d+)\)`)

func (p *Painter) decide(conv conversation) (call, error) {
	switch {
	case conv.results == 0:
		return call{name: "screenshot", args: map[string]any{}}, nil
	case conv.results > 1:
		return call{text: "I painted the square."}, nil
	case len(conv.images) == 0:
		return call{text: "I cannot see the canvas: the screenshot did not reach me."}, nil
	}
	m := squareAsked.FindStringSubmatch(conv.prompt)
	if m == nil {
		return call{}, fmt.Errorf("the prompt %q asks for no square", conv.prompt)
	}
	last := conv.images[len(conv.images)-1]
	if last.mimeType != "image/png" {
		return call{}, fmt.Errorf("the screenshot is %s, not image/png", last.mimeType)
	}
	img, err := png.Decode(bytes.NewReader(last.data))
	if err != nil {
		return call{}, fmt.Errorf("the screenshot is not a PNG: %v", err)
	}
	// The marker covers the corner; a pixel inside it, off its edge, has its color.
	name := p.nearest(img.At(img.Bounds().Min.X+1, img.Bounds().Min.Y+1))
	side, _ := strconv.Atoi(m[1])
	x, _ := strconv.Atoi(m[2])
	y, _ := strconv.Atoi(m[3])
	return call{name: "draw_rect", args: map[string]any{"x": x, "y": y, "width": side, "height": side, "color": name}}, nil
}

// nearest names the palette color closest to c.
func (p *Painter) nearest(c color.Color) string {
	r, g, b, _ := c.RGBA()
	best, bestDist := "", math.MaxFloat64
	for name, pc := range p.palette {
		d := sq(float64(r>>8)-float64(pc.R)) + sq(float64(g>>8)-float64(pc.G)) + sq(float64(b>>8)-float64(pc.B))
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

func sq(v float64) float64 { return v * v }

// readOpenAI reads a chat completions request: system messages, the first user text, tool
// messages, and the images of user messages (data: URLs).
func readOpenAI(r *http.Request) (conversation, error) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	var conv conversation
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return conv, fmt.Errorf("not a chat completions request: %v", err)
	}
	for _, m := range req.Messages {
		var text string
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.Content, &text) != nil {
			if err := json.Unmarshal(m.Content, &parts); err != nil && len(m.Content) > 0 && string(m.Content) != "null" {
				return conv, fmt.Errorf("a %s message's content is neither text nor parts: %v", m.Role, err)
			}
		}
		for _, part := range parts {
			switch part.Type {
			case "text":
				text += part.Text
			case "image_url":
				pic, err := fromDataURL(part.ImageURL.URL)
				if err != nil {
					return conv, err
				}
				conv.images = append(conv.images, pic)
			}
		}
		switch m.Role {
		case "system":
			conv.system += text
		case "user":
			if conv.prompt == "" {
				conv.prompt = text
			}
		case "tool":
			conv.results++
		}
	}
	return conv, nil
}

func fromDataURL(u string) (picture, error) {
	head, data, ok := strings.Cut(u, ",")
	mimeType, isBase64 := strings.CutSuffix(strings.TrimPrefix(head, "data:"), ";base64")
	if !ok || !strings.HasPrefix(head, "data:") || !isBase64 {
		return picture{}, fmt.Errorf("an image URL that is not a base64 data: URL: %.60s", u)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return picture{}, fmt.Errorf("an image data: URL that is not base64: %v", err)
	}
	return picture{mimeType: mimeType, data: b}, nil
}

// anthropicBlock is a content block of a Messages request, the few kinds the Painter reads.
type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"` // tool_result: a string or blocks
	Source  struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

// readAnthropic reads a Messages request: the system prompt, the first user text, tool_result
// blocks and the image blocks inside them.
func readAnthropic(r *http.Request) (conversation, error) {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []anthropicBlock `json:"content"`
		} `json:"messages"`
	}
	var conv conversation
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return conv, fmt.Errorf("not a messages request: %v", err)
	}
	var sys []anthropicBlock
	if json.Unmarshal(req.System, &conv.system) != nil {
		if err := json.Unmarshal(req.System, &sys); err != nil && len(req.System) > 0 {
			return conv, fmt.Errorf("system is neither text nor blocks: %v", err)
		}
		for _, b := range sys {
			conv.system += b.Text
		}
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				if m.Role == "user" && conv.prompt == "" {
					conv.prompt = b.Text
				}
			case "tool_result":
				conv.results++
				var inner []anthropicBlock
				_ = json.Unmarshal(b.Content, &inner) // a string result holds no image
				for _, ib := range inner {
					if ib.Type != "image" {
						continue
					}
					if ib.Source.Type != "base64" {
						return conv, fmt.Errorf("an image source of type %q", ib.Source.Type)
					}
					data, err := base64.StdEncoding.DecodeString(ib.Source.Data)
					if err != nil {
						return conv, fmt.Errorf("an image block that is not base64: %v", err)
					}
					conv.images = append(conv.images, picture{mimeType: ib.Source.MediaType, data: data})
				}
			}
		}
	}
	return conv, nil
}

// The replies, in the few fields of each provider's shape that clients read.
type (
	openAIToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	openAIMessage struct {
		Role      string           `json:"role"`
		Content   *string          `json:"content"`
		ToolCalls []openAIToolCall `json:"tool_calls,omitempty"`
	}
	openAIChoice struct {
		Index        int           `json:"index"`
		Message      openAIMessage `json:"message"`
		FinishReason string        `json:"finish_reason"`
	}
	openAIUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	openAICompletion struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		Model   string         `json:"model"`
		Choices []openAIChoice `json:"choices"`
		Usage   openAIUsage    `json:"usage"`
	}
	anthropicContent struct {
		Type  string         `json:"type"`
		Text  string         `json:"text,omitempty"`
		ID    string         `json:"id,omitempty"`
		Name  string         `json:"name,omitempty"`
		Input map[string]any `json:"input,omitempty"`
	}
	anthropicUsage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	}
	anthropicMessage struct {
		ID         string             `json:"id"`
		Type       string             `json:"type"`
		Role       string             `json:"role"`
		Model      string             `json:"model"`
		Content    []anthropicContent `json:"content"`
		StopReason string             `json:"stop_reason"`
		Usage      anthropicUsage     `json:"usage"`
	}
)

func openAIReply(n int, next call) openAICompletion {
	text := next.text
	choice := openAIChoice{Message: openAIMessage{Role: "assistant", Content: &text}, FinishReason: "stop"}
	if next.name != "" {
		tc := openAIToolCall{ID: fmt.Sprintf("call_%d", n), Type: "function"}
		args, _ := json.Marshal(next.args)
		tc.Function.Name, tc.Function.Arguments = next.name, string(args)
		choice.Message = openAIMessage{Role: "assistant", ToolCalls: []openAIToolCall{tc}}
		choice.FinishReason = "tool_calls"
	}
	return openAICompletion{ID: fmt.Sprintf("chatcmpl-%d", n), Object: "chat.completion", Model: "painter",
		Choices: []openAIChoice{choice}, Usage: openAIUsage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}}
}

func anthropicReply(n int, next call) anthropicMessage {
	content, stop := []anthropicContent{{Type: "text", Text: next.text}}, "end_turn"
	if next.name != "" {
		content = []anthropicContent{{Type: "tool_use", ID: fmt.Sprintf("toolu_%d", n), Name: next.name, Input: next.args}}
		stop = "tool_use"
	}
	return anthropicMessage{ID: fmt.Sprintf("msg_%d", n), Type: "message", Role: "assistant", Model: "painter",
		Content: content, StopReason: stop, Usage: anthropicUsage{InputTokens: 100, OutputTokens: 10}}
}
