package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/examples/environments/canvas/canvasenv"
	"github.com/proctorhq/proctor/examples/environments/internal/envtest"
)

var square = map[string]any{"x": 8, "y": 8, "size": 16, "color": "red"}

// The documented validation sequence earns 1.0; half the square earns 0.5; over real
// transports with the Go client, each call answering a decodable screenshot.
func TestEpisodesOverRealTransports(t *testing.T) {
	bin := envtest.Build(t)
	for name, connect := range map[string]func(t *testing.T) *mcp.ClientSession{
		"stdio": func(t *testing.T) *mcp.ClientSession { cs, _ := envtest.ConnectStdio(t, bin); return cs },
		"http": func(t *testing.T) *mcp.ClientSession {
			url, _ := envtest.StartHTTP(t, bin, "http")
			return envtest.ConnectHTTP(t, url)
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := connect(t)
			for _, ep := range []struct {
				steps []envtest.Step
				want  float64
			}{
				{[]envtest.Step{{Tool: "draw_rect", Arguments: map[string]any{"x": 8, "y": 8, "width": 16, "height": 16, "color": "red"}}}, 1},
				{[]envtest.Step{{Tool: "draw_rect", Arguments: map[string]any{"x": 8, "y": 8, "width": 16, "height": 8, "color": "red"}}}, 0.5},
				{nil, 0},
			} {
				if got := envtest.RunEpisode(t, cs, "draw-square", square, ep.steps); got.Reward != ep.want {
					t.Errorf("%+v: reward %v, want %v", ep.steps, got.Reward, ep.want)
				}
			}
			res := envtest.Call(t, cs, "screenshot", map[string]any{})
			img, ok := res.Content[0].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" {
				t.Fatalf("screenshot content = %#v", res.Content)
			}
			decoded, err := png.Decode(bytes.NewReader(img.Data))
			if err != nil || decoded.Bounds().Dx() != canvasenv.Size {
				t.Fatalf("screenshot = %v, %v", decoded, err)
			}
			// The last episode's setup cleared the canvas and nothing was drawn since.
			if r, g, b, _ := decoded.At(10, 10).RGBA(); r>>8 != 255 || g>>8 != 255 || b>>8 != 255 {
				t.Errorf("pixel (10,10) after a clear = %v, want white", decoded.At(10, 10))
			}
		})
	}
}

// Every capability through the official TypeScript SDK client, over stdio and streamable HTTP:
// image content beside structured output, progress, logging at the client's level, a binary
// resource and subscription to it, a resource template with completion.
func TestEveryCapabilityWithTheTypeScriptClient(t *testing.T) {
	bin := envtest.Build(t)
	plan := envtest.TSPlan{
		LogLevel:  "info",
		Subscribe: []string{canvasenv.ImageURI},
		Templates: true,
		Calls: []envtest.TSCall{
			{Name: "draw_rect", Arguments: map[string]any{"x": 0, "y": 0, "width": 4, "height": 4, "color": "blue"}},
			{Name: "fill", Arguments: map[string]any{"color": "yellow"}, Progress: true},
			{Name: "draw_rect", Arguments: map[string]any{"x": 0, "y": 0, "width": 1, "height": 1, "color": "purple"}},
			{Name: "export"},
			{Name: "beep"},
		},
		RawResources: []string{canvasenv.ImageURI, "canvas://palette/green"},
		Completions: []envtest.TSCompletion{{Ref: map[string]string{"type": "ref/resource", "uri": "canvas://palette/{color}"},
			Argument: map[string]string{"name": "color", "value": "b"}},
			{Ref: map[string]string{"type": "ref/prompt", "name": "draw-square"}, Argument: map[string]string{"name": "color", "value": "gr"}}},
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			p := plan
			if transport == "stdio" {
				p.Stdio = &envtest.TSStdio{Command: bin}
			} else {
				p.HTTP, _ = envtest.StartHTTP(t, bin, "http")
			}
			res := envtest.RunTSClient(t, p)
			draw := res.Calls[0]
			if draw.IsError || len(draw.Content) != 2 || draw.Content[0].Type != "image" || draw.Content[0].MIMEType != "image/png" ||
				draw.Content[0].Head != "89504e470d0a1a0a" || draw.StructuredContent["painted"] != 16.0 || draw.Content[1].Type != "text" {
				t.Errorf("draw_rect = %+v", draw)
			}
			// The TypeScript client handles notifications a tick after it reads them, and drops
			// progress that arrives in the same read as the answer: all 8 are sent (the Go tests
			// count them exactly), and the client sees them in order, at least one.
			fill := res.Calls[1]
			if len(fill.Progress) == 0 || fill.StructuredContent["painted"] != float64(canvasenv.Size*canvasenv.Size) {
				t.Errorf("fill progress = %+v, structured %v", fill.Progress, fill.StructuredContent)
			}
			for i, p := range fill.Progress {
				if p.Total != 8 || p.Progress != float64(i+1) || p.Message != fmt.Sprintf("band %d of 8", i+1) {
					t.Errorf("progress %d = %+v", i, p)
				}
			}
			if bad := res.Calls[2]; !bad.IsError || !strings.Contains(bad.Content[0].Text, `no color "purple"`) {
				t.Errorf("an unknown color = %+v", bad)
			}
			logs, _ := json.Marshal(res.Logs)
			if len(res.Logs) < 2 || res.Logs[0].Level != "info" || res.Logs[0].Logger != "draw_rect" || !bytes.Contains(logs, []byte("filled the canvas")) {
				t.Errorf("logs = %s", logs)
			}
			if len(res.Updated) < 2 || res.Updated[0] != canvasenv.ImageURI {
				t.Errorf("updates = %v, want one per painting call", res.Updated)
			}
			if img := res.RawResources[canvasenv.ImageURI]; img.MIMEType != "image/png" || img.Head != "89504e470d0a1a0a" || img.BlobBytes == 0 || img.Text != "" {
				t.Errorf("the image resource = %+v", img)
			}
			if green := res.RawResources["canvas://palette/green"]; !strings.Contains(green.Text, `"rgb":[30,160,60]`) {
				t.Errorf("a palette entry = %+v", green)
			}
			if len(res.Templates) != 1 || res.Templates[0].URITemplate != "canvas://palette/{color}" {
				t.Errorf("templates = %+v", res.Templates)
			}
			if export := res.Calls[3]; len(export.Content) != 2 || export.Content[0].Type != "resource" || export.Content[1].Type != "resource_link" {
				t.Errorf("export = %+v", export)
			}
			if beep := res.Calls[4]; len(beep.Content) != 1 || beep.Content[0].Type != "audio" || beep.Content[0].MIMEType != "audio/wav" ||
				beep.Content[0].Head != "5249464644030000" || beep.Content[0].Bytes != 844 {
				t.Errorf("beep = %+v", beep)
			}
			if len(res.Completions) != 2 || strings.Join(res.Completions[0].Values, ",") != "black,blue" || strings.Join(res.Completions[1].Values, ",") != "green" {
				t.Errorf("completions = %+v", res.Completions)
			}
			if res.Capabilities["completions"] == nil || res.Capabilities["logging"] == nil {
				t.Errorf("capabilities = %v", res.Capabilities)
			}
		})
	}
}
