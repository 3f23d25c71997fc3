package envserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Blob is binary resource contents with their media type: a [ResourceFunc] that returns one is
// read as a blob of that type. (A []byte is sniffed: text stays text, anything else is a blob.)
type Blob struct {
	MIMEType string
	Data     []byte
}

// TemplateFunc reads the resource at uri, one of those a resource template matches.
type TemplateFunc func(ctx context.Context, uri string) (any, error)

// ResourceTemplate registers the resources matching an RFC 6570 URI template (for example
// "files://{path}"), read by fn with the URI the client asked for; fn's value is read as a
// [ResourceFunc]'s is. It returns an error for a template without a scheme or one already
// registered.
func (s *Server) ResourceTemplate(uriTemplate, description string, fn TemplateFunc) error {
	scheme, _, ok := strings.Cut(uriTemplate, "://")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "{}") || fn == nil {
		return fmt.Errorf("add resource template %q: want <scheme>://<template> and a function", uriTemplate)
	}
	s.mu.Lock()
	if s.resources[uriTemplate] {
		s.mu.Unlock()
		return fmt.Errorf("add resource template %q: %w", uriTemplate, ErrDuplicate)
	}
	s.resources[uriTemplate] = true
	s.mu.Unlock()
	t := &mcp.ResourceTemplate{URITemplate: uriTemplate, Name: strings.TrimPrefix(uriTemplate, scheme+"://"), Description: description}
	err := safeCall(func() error {
		s.mcp.AddResourceTemplate(t, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			v, err := fn(withEnv(ctx, s.env), req.Params.URI)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", req.Params.URI, err)
			}
			return resourceResult(req.Params.URI, v)
		})
		return nil
	})
	if err != nil {
		s.mu.Lock()
		delete(s.resources, uriTemplate)
		s.mu.Unlock()
		return fmt.Errorf("add resource template %q: %w", uriTemplate, err)
	}
	return nil
}

// Updated tells the clients that subscribed to uri (resources/subscribe) that it changed, so
// that they read it again.
func (s *Server) Updated(ctx context.Context, uri string) error {
	return s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

// CompleteFunc proposes values for an argument the client is typing: value is what it has
// typed, resolved the arguments it has already chosen. At most 100 values are sent.
type CompleteFunc func(ctx context.Context, value string, resolved map[string]string) ([]string, error)

type completionKey struct{ refType, ref, arg string }

// CompletePromptArgument registers completion of argument arg of prompt (scenarios are prompts).
func (s *Server) CompletePromptArgument(prompt, arg string, fn CompleteFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completers[completionKey{"ref/prompt", prompt, arg}] = fn
}

// CompleteResourceArgument registers completion of variable arg of a resource template.
func (s *Server) CompleteResourceArgument(uriTemplate, arg string, fn CompleteFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.completers[completionKey{"ref/resource", uriTemplate, arg}] = fn
}

// complete answers completion/complete from the registered completers (no values for others).
func (s *Server) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p := req.Params
	out := &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}
	if p == nil || p.Ref == nil {
		return out, nil
	}
	ref := p.Ref.Name
	if p.Ref.Type == "ref/resource" {
		ref = p.Ref.URI
	}
	s.mu.Lock()
	fn := s.completers[completionKey{p.Ref.Type, ref, p.Argument.Name}]
	s.mu.Unlock()
	if fn == nil {
		return out, nil
	}
	var resolved map[string]string
	if p.Context != nil {
		resolved = p.Context.Arguments
	}
	var values []string
	if err := safeCall(func() (err error) { values, err = fn(withEnv(ctx, s.env), p.Argument.Value, resolved); return err }); err != nil {
		return nil, fmt.Errorf("complete %s %s: %w", ref, p.Argument.Name, err)
	}
	out.Completion.Total = len(values)
	if len(values) > 100 {
		values, out.Completion.HasMore = values[:100], true
	}
	out.Completion.Values = append(out.Completion.Values, values...)
	return out, nil
}

// bytesContents reads a []byte resource: text (with its sniffed type) when it is text, else a
// blob of its sniffed type.
func bytesContents(uri string, b []byte) *mcp.ResourceContents {
	mime := http.DetectContentType(b)
	if strings.HasPrefix(mime, "text/") {
		return &mcp.ResourceContents{URI: uri, MIMEType: mime, Text: string(b)}
	}
	return &mcp.ResourceContents{URI: uri, MIMEType: mime, Blob: b}
}
