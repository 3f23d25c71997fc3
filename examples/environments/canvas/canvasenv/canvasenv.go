// Package canvasenv is an example environment that uses every capability envserver offers beyond
// text tools: a 64×64 canvas an agent paints on, whose tools answer with screenshots (PNG image
// content beside structured output), report progress and log to the client; the picture is a
// binary resource clients can subscribe to; a resource template serves the palette, with
// completion of color names; and two scenarios, one of which only an agent that sees the screenshots can solve. It may import envserver and the standard
// library only.
//
// The command examples/environments/canvas serves it, and so does `proctor example-env canvas`:
//
//	canvas [--transport stdio|http|sse] [--port 8765]
//
// Scenarios, and for draw-square a visible tool call that earns reward 1.0 from a fresh server:
//
//	draw-square {"x": 8, "y": 8, "size": 16, "color": "red"}
//	  setup    {"name": "clear", "arguments": <args>}
//	  agent    draw_rect {"x": 8, "y": 8, "width": 16, "height": 16, "color": "red"}
//	  evaluate {"name": "square_drawn", "arguments": <args>}  → reward 1.0
//
// The reward is the share of the square's pixels that have its color. copy-color takes the same
// arguments, but its prompt does not name the color: its setup paints a MarkerSize square of it
// in the top-left corner, and only a screenshot shows it.
package canvasenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"strings"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

// ImageURI is the resource holding the canvas as a PNG; subscribers hear of every change.
const ImageURI = "canvas://image"

// MarkerSize is the side of the square the copy-color scenario's setup paints in the canvas's
// top-left corner.
const MarkerSize = 8

type rectArgs struct {
	X      int    `json:"x" jsonschema:"left edge, 0 to 63"`
	Y      int    `json:"y" jsonschema:"top edge, 0 to 63"`
	Width  int    `json:"width" jsonschema:"in pixels"`
	Height int    `json:"height" jsonschema:"in pixels"`
	Color  string `json:"color" jsonschema:"a palette color: black, blue, green, red, white or yellow"`
}

type fillArgs struct {
	Color string `json:"color" jsonschema:"a palette color"`
}

// shot is what the painting tools answer: a screenshot beside the canvas's figures.
type shot struct {
	Width   int `json:"width"`
	Height  int `json:"height"`
	Painted int `json:"painted" jsonschema:"pixels this call painted"`
	envserver.Content
}

type squareArgs struct {
	X     int    `json:"x"`
	Y     int    `json:"y"`
	Size  int    `json:"size"`
	Color string `json:"color"`
}

// New builds the canvas environment. It reads as the environment's manifest: the state, the
// visible tools, the resources with their completions, the setup and evaluate hubs and the
// scenarios.
func New(logger *slog.Logger) (*envserver.Server, error) {
	srv := envserver.New("canvas-env",
		envserver.WithVersion("1.0.0"),
		envserver.WithInstructions("A 64×64 canvas. Paint with draw_rect and fill; see it with screenshot. Colors: "+strings.Join(colorNames(), ", ")+"."),
		envserver.WithLogger(logger))
	cv := &canvas{srv: srv}
	cv.reset()
	err := errors.Join(
		addTools(srv, cv),
		addResources(srv, cv),
		addHubs(srv, cv),
		addScenarios(srv),
	)
	if err != nil {
		return nil, fmt.Errorf("build canvas environment: %w", err)
	}
	return srv, nil
}

// addTools registers the visible tools: what the agent paints and looks with.
func addTools(srv *envserver.Server, cv *canvas) error {
	return errors.Join(
		added(envserver.AddTool(srv, "draw_rect", "Paint a rectangle; answers a screenshot", cv.drawRect)),
		added(envserver.AddTool(srv, "fill", "Paint the whole canvas, row band by row band, reporting progress", cv.fill)),
		added(envserver.AddTool(srv, "screenshot", "See the canvas", cv.screenshot)),
		added(envserver.AddTool(srv, "beep", "A short beep (audio content), for agents that listen", beep)),
		added(envserver.AddTool(srv, "export", "The canvas as an embedded PNG resource and a link to the live one", cv.export)),
	)
}

// addResources registers the picture, which clients may subscribe to, and the palette, whose
// color names complete as a client types them.
func addResources(srv *envserver.Server, cv *canvas) error {
	err := errors.Join(
		srv.Resource(ImageURI, "The canvas as a PNG image; subscribe to hear of changes", cv.imageResource),
		srv.ResourceTemplate("canvas://palette/{color}", "A palette color's RGB", paletteColor),
	)
	srv.CompleteResourceArgument("canvas://palette/{color}", "color", completeColor)
	srv.CompletePromptArgument("draw-square", "color", completeColor)
	return err
}

// addHubs registers the hidden functions the platform prepares and scores an attempt with,
// behind the setup and evaluate dispatchers.
func addHubs(srv *envserver.Server, cv *canvas) error {
	setup := envserver.NewHub(envserver.SetupHub)
	evaluate := envserver.NewHub(envserver.EvaluateHub)
	return errors.Join(
		added(envserver.AddTool(setup, "clear", "Make the canvas white", cv.clear)),
		added(envserver.AddTool(setup, "mark", "Make the canvas white but for a square of the task's color in its top-left corner", cv.mark)),
		added(envserver.AddTool(evaluate, "square_drawn", "Reward the share of the square's pixels that have its color", cv.squareDrawn)),
		srv.Mount(setup),
		srv.Mount(evaluate),
	)
}

// added keeps the error of an [envserver.AddTool], dropping the function it hands back.
func added[F any](_ F, err error) error { return err }

// addScenarios declares the tasks: the prompt the agent gets and the hub calls around it.
func addScenarios(srv *envserver.Server) error {
	return errors.Join(
		envserver.AddScenario(srv, envserver.Scenario[squareArgs]{
			Name:        "draw-square",
			Title:       "Draw a square",
			Description: "On a white canvas, paint a square of a palette color.",
			Prompt:      `Paint a {{.Color}} square of side {{.Size}} pixels whose top-left corner is at ({{.X}}, {{.Y}}).`,
			Setup:       envserver.Call{Tool: envserver.SetupHub, Name: "clear"},
			Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: "square_drawn"},
		}),
		// The color to paint is only in the picture: an agent that cannot see the screenshot can
		// only guess it.
		envserver.AddScenario(srv, envserver.Scenario[squareArgs]{
			Name:        "copy-color",
			Title:       "Copy a color you can only see",
			Description: "The canvas shows a small square in its top-left corner; paint a square of the same color elsewhere. The prompt does not name the color.",
			Prompt: `The top-left corner of the canvas holds a small colored square. Paint a square of that same color, of side {{.Size}} pixels, ` +
				`whose top-left corner is at ({{.X}}, {{.Y}}). Take a screenshot to see it.`,
			Setup:    envserver.Call{Tool: envserver.SetupHub, Name: "mark"},
			Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "square_drawn"},
		}),
	)
}

// changed tells the subscribers of ImageURI that the canvas changed.
func (c *canvas) changed(ctx context.Context) error { return c.srv.Updated(ctx, ImageURI) }

// answer is what the painting tools return: a screenshot, after telling the subscribers when
// the call painted anything.
func (c *canvas) answer(ctx context.Context, painted int) (*shot, error) {
	out := &shot{Width: Size, Height: Size, Painted: painted}
	if err := out.PNG(c.snapshot()); err != nil {
		return nil, err
	}
	if painted > 0 {
		if err := c.changed(ctx); err != nil {
			envserver.Logger(ctx).Warn("notify subscribers", "error", err)
		}
	}
	return out, nil
}

func (c *canvas) drawRect(ctx context.Context, in rectArgs) (*shot, error) {
	col, err := lookup(in.Color)
	if err != nil {
		return nil, err
	}
	n := c.paint(in.X, in.Y, in.Width, in.Height, col)
	envserver.Logger(ctx).Info("painted a rectangle", "pixels", n, "color", in.Color)
	return c.answer(ctx, n)
}

func (c *canvas) fill(ctx context.Context, in fillArgs) (*shot, error) {
	col, err := lookup(in.Color)
	if err != nil {
		return nil, err
	}
	const bands = 8
	n := 0
	for b := range bands {
		n += c.paint(0, b*Size/bands, Size, Size/bands, col)
		time.Sleep(10 * time.Millisecond) // a band takes a while, as real work does
		if err := envserver.Progress(ctx, float64(b+1), bands, fmt.Sprintf("band %d of %d", b+1, bands)); err != nil {
			return nil, err
		}
	}
	envserver.Logger(ctx).Info("filled the canvas", "color", in.Color)
	return c.answer(ctx, n)
}

func (c *canvas) screenshot(ctx context.Context, _ struct{}) (*shot, error) {
	return c.answer(ctx, 0)
}

// contentOnly is the output of the tools that answer with content blocks alone.
type contentOnly = struct{ envserver.Content }

func beep(ctx context.Context, _ struct{}) (*contentOnly, error) {
	out := &contentOnly{}
	out.Audio(beepWAV(), "audio/wav")
	return out, nil
}

func (c *canvas) export(ctx context.Context, _ struct{}) (*contentOnly, error) {
	b, err := c.encodePNG()
	if err != nil {
		return nil, err
	}
	out := &contentOnly{}
	out.Resource("canvas://export.png", "image/png", b)
	out.Link(ImageURI, "the live canvas", "image/png")
	return out, nil
}

// imageResource is the resource ImageURI.
func (c *canvas) imageResource(ctx context.Context) (any, error) {
	b, err := c.encodePNG()
	if err != nil {
		return nil, err
	}
	return envserver.Blob{MIMEType: "image/png", Data: b}, nil
}

// paletteColor is the resource template canvas://palette/{color}.
func paletteColor(ctx context.Context, uri string) (any, error) {
	name := strings.TrimPrefix(uri, "canvas://palette/")
	c, err := lookup(name)
	if err != nil {
		return nil, err
	}
	return map[string]any{"color": name, "rgb": []int{int(c.R), int(c.G), int(c.B)}}, nil
}

// completeColor proposes the palette colors whose names start with what the client typed.
func completeColor(ctx context.Context, value string, _ map[string]string) ([]string, error) {
	var out []string
	for _, n := range colorNames() {
		if strings.HasPrefix(n, strings.ToLower(value)) {
			out = append(out, n)
		}
	}
	return out, nil
}

// clear is the setup function of draw-square.
func (c *canvas) clear(ctx context.Context, _ squareArgs) (map[string]int, error) {
	c.reset()
	return map[string]int{"size": Size}, c.changed(ctx)
}

// mark is the setup function of copy-color.
func (c *canvas) mark(ctx context.Context, in squareArgs) (map[string]int, error) {
	col, err := lookup(in.Color)
	if err != nil {
		return nil, err
	}
	c.reset()
	c.paint(0, 0, MarkerSize, MarkerSize, col)
	return map[string]int{"size": Size, "marker": MarkerSize}, c.changed(ctx)
}

// squareDrawn is the evaluate function of both scenarios.
func (c *canvas) squareDrawn(ctx context.Context, in squareArgs) (envserver.EvaluationResult, error) {
	want, err := lookup(in.Color)
	if err != nil {
		return envserver.EvaluationResult{}, err
	}
	img := c.snapshot()
	total, good := 0, 0
	for y := in.Y; y < in.Y+in.Size; y++ {
		for x := in.X; x < in.X+in.Size; x++ {
			total++
			if image.Pt(x, y).In(img.Rect) && img.RGBAAt(x, y) == want {
				good++
			}
		}
	}
	reward := 0.0
	if total > 0 {
		reward = float64(good) / float64(total)
	}
	return envserver.EvaluationResult{Reward: reward, Done: true, Content: fmt.Sprintf("%d of %d pixels are %s", good, total, in.Color)}, nil
}

// beepWAV is 0.1 s of a 880 Hz square wave: 8 kHz, 8-bit mono PCM in a WAV container.
func beepWAV() []byte {
	const rate, n = 8000, 800
	var b bytes.Buffer
	le := func(v uint32, size int) {
		for i := range size {
			b.WriteByte(byte(v >> (8 * i)))
		}
	}
	b.WriteString("RIFF")
	le(36+n, 4)
	b.WriteString("WAVEfmt ")
	le(16, 4)
	le(1, 2) // PCM
	le(1, 2) // mono
	le(rate, 4)
	le(rate, 4) // bytes per second
	le(1, 2)    // block align
	le(8, 2)    // bits per sample
	b.WriteString("data")
	le(n, 4)
	for i := range n {
		if (i*880*2/rate)%2 == 0 {
			b.WriteByte(200)
		} else {
			b.WriteByte(56)
		}
	}
	return b.Bytes()
}
