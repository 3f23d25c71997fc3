package main

import (
	"context"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/examples/environments/canvas/canvasenv"
	"github.com/proctorhq/proctor/internal/fakemodel"
)

// testAgentSeesScreenshots deploys the canvas example as a user's environment and runs its
// copy-color scenario, whose prompt does not name the color: the scripted model answers from the
// pixels of the screenshot it is sent, so reward 1 means that the image went from the tool result
// to object storage, back out of it for the next model call, and to the model, on both providers'
// adapters. The trace serves the screenshot, and so does the analysis bundle.
func testAgentSeesScreenshots(t *testing.T, c api, dataDir string, storeArgs []string) {
	t.Helper()
	// Not vendored: the builder supplies the envserver module its go.mod requires (or, where this
	// worker built the same source before, its build cache has the image that build made).
	if out, err := c.cli("env", "deploy", outOfTreeExample(t, "canvas", false), "--name", "canvas-cli"); err != nil || !strings.Contains(out, "copy-color") ||
		!strings.Contains(out, "envserver: the builder supplies") && !strings.Contains(out, "build cache: this worker built the same source") {
		t.Fatalf("env deploy canvas: %v\n%s", err, out)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "vision", "tasks": []any{map[string]any{
		"name": "copy-green", "env": "canvas-cli", "scenario": "copy-color", "args": map[string]any{"x": 30, "y": 20, "size": 12, "color": "green"}}}}, &up)

	painter := fakemodel.NewPainter(t, canvasenv.Palette(), "A 64×64 canvas.")
	openAI := addScriptedModel(t, c, dataDir, storeArgs, "painter-openai", painter.URL)
	if err := run(context.Background(), append([]string{"admin", "model", "add", "--name", "painter-anthropic", "--adapter", "anthropic",
		"--base-url", painter.URL, "--api-key-env", "SCRIPTED_KEY", "--data-dir", dataDir}, storeArgs...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	anthropic := c.resolve("/v2/models/resolve?model=painter-anthropic", "id")
	for name, model := range map[string]string{"openai": openAI, "anthropic": anthropic} {
		tr, logs := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": model})
		if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
			t.Fatalf("%s: the copy-color attempt = %+v; the model saw %d image(s), refused %q\n%s", name, tr, painter.Images(), painter.Refusals(), logs)
		}
		var ev struct {
			Events []struct {
				Kind   string
				Text   string
				Images []struct {
					URL      string `json:"url"`
					MIMEType string `json:"mime_type"`
					Size     int    `json:"size"`
				}
			}
		}
		c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &ev)
		var shots []string
		for _, e := range ev.Events {
			for _, im := range e.Images {
				if e.Kind != "tool_result" || im.MIMEType != "image/png" || im.URL == "" {
					t.Fatalf("%s: an image %+v on a %s event", name, im, e.Kind)
				}
				shots = append(shots, im.URL)
			}
		}
		if len(shots) != 2 { // the screenshot, then draw_rect's
			t.Fatalf("%s: %d images in the trace, want 2", name, len(shots))
		}
		// The first screenshot, fetched as a browser would, shows the green marker.
		res, err := http.Get(shots[0])
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s: the trace's screenshot: %v", name, err)
		}
		if r, g, b, _ := img.At(1, 1).RGBA(); canvasenv.Palette()["green"] != (color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}) {
			t.Errorf("%s: the screenshot's corner is (%d, %d, %d), not green", name, r>>8, g>>8, b>>8)
		}
		shotPath, _, _ := strings.Cut(shots[0], "?") // signatures differ from one read to the next
		if shown, err := c.cli("trace", tr.ID); err != nil || !strings.Contains(shown, "image             image/png, ") || !strings.Contains(shown, shotPath) {
			t.Errorf("%s: proctor trace does not list the screenshots: %v\n%s", name, err, shown)
		}
		var bundle struct {
			Events []struct {
				Images []struct{ URL string }
			}
		}
		c.call("GET", "/v2/trace/"+tr.ID+"/analysis-context", nil, &bundle)
		n := 0
		for _, e := range bundle.Events {
			n += len(e.Images)
		}
		if len(bundle.Events) != len(ev.Events) || n != 2 {
			t.Errorf("%s: the analysis bundle has %d events with %d images, want %d with 2", name, len(bundle.Events), n, len(ev.Events))
		}
	}
	if refused := painter.Refusals(); len(refused) > 0 {
		t.Errorf("the model refused requests: %q", refused)
	}
}

// mistakenEnvironment is an environment whose scenario passes its arguments to a setup function
// that takes none: every attempt would fail at setup.
const mistakenEnvironment = `package main

import (
	"context"
	"log/slog"

	"github.com/proctorhq/proctor/envserver"
)

type args struct {
	Items []string ` + "`json:\"items\"`" + `
}

func main() {
	envserver.Main(func(logger *slog.Logger) (*envserver.Server, error) {
		srv := envserver.New("mistaken", envserver.WithLogger(logger))
		setup := envserver.NewHub(envserver.SetupHub)
		if _, err := envserver.AddTool(setup, "reset", "Start over", func(ctx context.Context, _ struct{}) (map[string]int, error) {
			return map[string]int{}, nil
		}); err != nil {
			return nil, err
		}
		if err := srv.Mount(setup); err != nil {
			return nil, err
		}
		return srv, envserver.AddScenario(srv, envserver.Scenario[args]{Name: "add", Prompt: "Add {{join .Items \", \"}}.",
			Setup: envserver.Call{Tool: envserver.SetupHub, Name: "reset"}})
	})
}
`

// testDeployChecksScenarioCalls: a scenario whose setup cannot take its arguments fails the
// build, saying which scenario and why, instead of failing every attempt later.
func testDeployChecksScenarioCalls(t *testing.T, c api) {
	t.Helper()
	out, err := c.cli("env", "deploy", outOfTreeModule(t, []byte(mistakenEnvironment)), "--name", "mistaken")
	t.Logf("$ proctor env deploy ./mistaken --name mistaken\n%s", out)
	want := `scenario "add": its setup calls setup "reset" with the scenario's arguments, but the function takes no arguments and the scenario passes items`
	if err == nil || !strings.Contains(out+err.Error(), want) {
		t.Errorf("env deploy of a scenario whose setup takes no arguments: %v\n%s\nwant a failed build saying %q", err, out, want)
	}
	// The build's log, which deploy follows, ends with the same reason.
	if !strings.Contains(out, "build failed: the environment's scenarios call its hubs in ways that would fail every attempt:\n     - "+want) {
		t.Errorf("the failed build's log does not end with the reason:\n%s", out)
	}
}
