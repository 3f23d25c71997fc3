package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type screen struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	Content
}

type mediaOnly struct {
	Content
}

// Typed tools return content blocks beside their structured output: images (encoded from an
// image.Image or as bytes), audio, linked and embedded resources, text; over both transports.
func TestRichToolResults(t *testing.T) {
	s := New("rich")
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	MustAddTool(s, "screenshot", "The screen", func(ctx context.Context, _ struct{}) (*screen, error) {
		out := &screen{Width: 4, Height: 3}
		if err := out.PNG(img); err != nil {
			return nil, err
		}
		if err := out.JPEG(img, 80); err != nil {
			return nil, err
		}
		out.Text("a red dot at 1,1")
		return out, nil
	})
	MustAddTool(s, "media", "Media only, by value", func(ctx context.Context, _ struct{}) (mediaOnly, error) {
		var out mediaOnly
		out.Audio([]byte("RIFF....WAVE"), "audio/wav")
		out.Link("file:///logs/run.txt", "run log", "text/plain")
		out.Resource("mem://notes.json", "application/json", []byte(`{"a":1}`))
		out.Resource("mem://blob.bin", "application/octet-stream", []byte{0, 1, 2})
		return out, nil
	})
	if tool := s.MCP(); tool == nil {
		t.Fatal("no mcp server")
	}
	ts := serveHTTPTest(t, s)
	for transport, connect := range map[string]func() (*mcp.ClientSession, error){
		"in-memory": func() (*mcp.ClientSession, error) { return connectInMemory(t, s, clientOptions{}) },
		"http":      func() (*mcp.ClientSession, error) { return connectHTTP(t, ts.URL, clientOptions{}) },
	} {
		t.Run(transport, func(t *testing.T) {
			cs, err := connect()
			if err != nil {
				t.Fatal(err)
			}
			tools, err := cs.ListTools(testContext(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range tools.Tools {
				if tool.Name == "screenshot" {
					props, _ := json.Marshal(tool.OutputSchema)
					if !bytes.Contains(props, []byte(`"width"`)) || bytes.Contains(props, []byte(`Content`)) || bytes.Contains(props, []byte(`blocks`)) {
						t.Errorf("output schema = %s", props)
					}
				}
			}
			res := callTool(t, cs, "screenshot", map[string]any{})
			if len(res.Content) != 4 {
				t.Fatalf("screenshot content = %d blocks", len(res.Content))
			}
			pngBlock, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || pngBlock.MIMEType != "image/png" {
				t.Fatalf("first block = %#v", res.Content[0])
			}
			decoded, err := png.Decode(bytes.NewReader(pngBlock.Data))
			if err != nil || decoded.Bounds().Dx() != 4 {
				t.Errorf("the PNG = %v, %v", decoded, err)
			} else if r, _, _, _ := decoded.At(1, 1).RGBA(); r>>8 != 255 {
				t.Errorf("the red dot is gone")
			}
			if jpg, ok := res.Content[1].(*mcp.ImageContent); !ok || jpg.MIMEType != "image/jpeg" || len(jpg.Data) == 0 {
				t.Errorf("second block = %#v", res.Content[1])
			}
			if txt, ok := res.Content[2].(*mcp.TextContent); !ok || txt.Text != "a red dot at 1,1" {
				t.Errorf("third block = %#v", res.Content[2])
			}
			if txt, ok := res.Content[3].(*mcp.TextContent); !ok || txt.Text != `{"width":4,"height":3}` {
				t.Errorf("the structured output's text = %#v", res.Content[3])
			}
			var sc map[string]any
			b, _ := json.Marshal(res.StructuredContent)
			if json.Unmarshal(b, &sc); sc["width"] != float64(4) || len(sc) != 2 {
				t.Errorf("structured = %s", b)
			}

			res = callTool(t, cs, "media", map[string]any{})
			if len(res.Content) != 4 {
				t.Fatalf("media content = %d blocks: %#v", len(res.Content), res.Content)
			}
			if a, ok := res.Content[0].(*mcp.AudioContent); !ok || a.MIMEType != "audio/wav" || string(a.Data) != "RIFF....WAVE" {
				t.Errorf("audio = %#v", res.Content[0])
			}
			if l, ok := res.Content[1].(*mcp.ResourceLink); !ok || l.URI != "file:///logs/run.txt" || l.Name != "run log" {
				t.Errorf("link = %#v", res.Content[1])
			}
			if e, ok := res.Content[2].(*mcp.EmbeddedResource); !ok || e.Resource.Text != `{"a":1}` || e.Resource.Blob != nil {
				t.Errorf("embedded text = %#v", res.Content[2])
			}
			if e, ok := res.Content[3].(*mcp.EmbeddedResource); !ok || !bytes.Equal(e.Resource.Blob, []byte{0, 1, 2}) || e.Resource.MIMEType != "application/octet-stream" {
				t.Errorf("embedded blob = %#v", res.Content[3])
			}
		})
	}
}

// A typed output's slices are advertised as arrays, not ["null","array"], and a nil slice is sent
// as []; an omitempty slice may be absent.
func TestOutputSlicesAreArrays(t *testing.T) {
	type listing struct {
		Items []string `json:"items"`
		Tags  []string `json:"tags,omitempty"`
		Pages [][]int  `json:"pages"`
	}
	s := New("slices")
	MustAddTool(s, "list", "An empty listing", func(ctx context.Context, _ struct{}) (listing, error) {
		return listing{Pages: [][]int{nil, {1}}}, nil
	})
	cs := mustConnect(t, s)
	tools, err := cs.ListTools(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := json.Marshal(tools.Tools[0].OutputSchema)
	if bytes.Contains(schema, []byte(`"null"`)) {
		t.Errorf("output schema advertises null: %s", schema)
	}
	res := callTool(t, cs, "list", map[string]any{})
	if res.IsError {
		t.Fatalf("list = %+v", res)
	}
	got, _ := json.Marshal(res.StructuredContent)
	if string(got) != `{"items":[],"pages":[[],[1]]}` {
		t.Errorf("structured = %s", got)
	}
}
