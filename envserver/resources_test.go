package envserver

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Binary resources are blobs with their type, templates serve a family of URIs, subscribed
// clients hear of updates, and completions propose template variables; over both transports.
func TestResourcesTemplatesSubscriptionsAndCompletions(t *testing.T) {
	s := New("files")
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 16)...)
	if err := s.Resource("mem://logo", "The logo", func(context.Context) (any, error) { return Blob{MIMEType: "image/png", Data: png}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Resource("mem://raw", "Raw bytes", func(context.Context) (any, error) { return []byte{0, 1, 2, 3}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Resource("mem://note", "A note as bytes", func(context.Context) (any, error) { return []byte("hello"), nil }); err != nil {
		t.Fatal(err)
	}
	files := []string{"alpha.txt", "beta.txt", "alps.md"}
	if err := s.ResourceTemplate("files://{name}", "A file by name", func(ctx context.Context, uri string) (any, error) {
		name := strings.TrimPrefix(uri, "files://")
		if !slices.Contains(files, name) {
			return nil, fmt.Errorf("no file %s", name)
		}
		return "contents of " + name, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.ResourceTemplate("files://{name}", "again", func(context.Context, string) (any, error) { return nil, nil }); err == nil {
		t.Error("a template registered twice")
	}
	s.CompleteResourceArgument("files://{name}", "name", func(ctx context.Context, value string, _ map[string]string) ([]string, error) {
		var out []string
		for _, f := range files {
			if strings.HasPrefix(f, value) {
				out = append(out, f)
			}
		}
		return out, nil
	})
	ts := serveHTTPTest(t, s)

	for transport, connect := range map[string]func(*mcp.ClientOptions) (*mcp.ClientSession, error){
		"in-memory": func(o *mcp.ClientOptions) (*mcp.ClientSession, error) {
			clientT, serverT := mcp.NewInMemoryTransports()
			ss, err := s.MCP().Connect(testContext(t), serverT, nil)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = ss.Close() })
			return mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, o).Connect(testContext(t), clientT, nil)
		},
		"http": func(o *mcp.ClientOptions) (*mcp.ClientSession, error) {
			return mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, o).Connect(testContext(t), &mcp.StreamableClientTransport{Endpoint: ts.URL + HTTPPath}, nil)
		},
	} {
		t.Run(transport, func(t *testing.T) {
			var mu sync.Mutex
			var updated []string
			cs, err := connect(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				mu.Lock()
				defer mu.Unlock()
				updated = append(updated, req.Params.URI)
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			caps := cs.InitializeResult().Capabilities
			if caps.Completions == nil || caps.Resources == nil || !caps.Resources.Subscribe {
				t.Errorf("capabilities = %+v", caps)
			}
			ctx := testContext(t)
			read := func(uri string) *mcp.ResourceContents {
				t.Helper()
				res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
				if err != nil || len(res.Contents) != 1 {
					t.Fatalf("read %s = %+v, %v", uri, res, err)
				}
				return res.Contents[0]
			}
			if c := read("mem://logo"); c.MIMEType != "image/png" || !bytes.Equal(c.Blob, png) || c.Text != "" {
				t.Errorf("logo = %+v", c)
			}
			if c := read("mem://raw"); c.MIMEType != "application/octet-stream" || !bytes.Equal(c.Blob, []byte{0, 1, 2, 3}) {
				t.Errorf("raw = %+v", c)
			}
			if c := read("mem://note"); c.Text != "hello" || !strings.HasPrefix(c.MIMEType, "text/plain") || c.Blob != nil {
				t.Errorf("note = %+v", c)
			}
			if c := read("files://beta.txt"); c.Text != "contents of beta.txt" {
				t.Errorf("a templated resource = %+v", c)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "files://gamma.txt"}); err == nil {
				t.Error("a missing templated resource was read")
			}
			tmpls, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != "files://{name}" {
				t.Errorf("templates = %+v, %v", tmpls, err)
			}

			got, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "files://{name}"},
				Argument: mcp.CompleteParamsArgument{Name: "name", Value: "al"}})
			if err != nil || !slices.Equal(got.Completion.Values, []string{"alpha.txt", "alps.md"}) || got.Completion.Total != 2 {
				t.Errorf("complete = %+v, %v", got, err)
			}
			got, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nothing"},
				Argument: mcp.CompleteParamsArgument{Name: "x", Value: "a"}})
			if err != nil || len(got.Completion.Values) != 0 {
				t.Errorf("complete of nothing registered = %+v, %v", got, err)
			}

			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "mem://note"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Updated(ctx, "mem://note"); err != nil {
				t.Fatal(err)
			}
			s.Updated(ctx, "mem://logo") //nolint:errcheck // nobody subscribed: nothing is sent
			for i := 0; i < 200; i++ {
				mu.Lock()
				n := len(updated)
				mu.Unlock()
				if n > 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "mem://note"}); err != nil {
				t.Fatal(err)
			}
			s.Updated(ctx, "mem://note") //nolint:errcheck
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(updated, []string{"mem://note"}) {
				t.Errorf("update notifications = %v, want one for mem://note", updated)
			}
		})
	}
}
