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
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

// Size is the canvas's side in pixels.
const Size = 64

// ImageURI is the resource holding the canvas as a PNG; subscribers hear of every change.
const ImageURI = "canvas://image"

// palette names the colors tools accept.
var palette = map[string]color.RGBA{
	"white": {255, 255, 255, 255}, "black": {0, 0, 0, 255}, "red": {220, 30, 30, 255},
	"green": {30, 160, 60, 255}, "blue": {30, 80, 220, 255}, "yellow": {240, 200, 20, 255},
}

// Palette returns the colors tools accept, by name.
func Palette() map[string]color.RGBA { return maps.Clone(palette) }

// MarkerSize is the side of the square the copy-color scenario's setup paints in the canvas's
// top-left corner.
const MarkerSize = 8

func colorNames() []string {
	names := make([]string, 0, len(palette))
	for n := range palette {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// canvas is the environment's state.
type canvas struct {
	mu  sync.Mutex
	img *image.RGBA
}

func (c *canvas) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.img = image.NewRGBA(image.Rect(0, 0, Size, Size))
	for i := range c.img.Pix {
		c.img.Pix[i] = 255
	}
}

// snapshot is a copy of the canvas.
func (c *canvas) snapshot() *image.RGBA {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := *c.img
	cp.Pix = slices.Clone(c.img.Pix)
	return &cp
}

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

func New(logger *slog.Logger) (*envserver.Server, error) {
	cv := &canvas{}
	cv.clear()
	srv := envserver.New("canvas-env",
		envserver.WithVersion("1.0.0"),
		envserver.WithInstructions("A 64×64 canvas. Paint with draw_rect and fill; see it with screenshot. Colors: "+strings.Join(colorNames(), ", ")+"."),
		envserver.WithEnv(cv),
		envserver.WithLogger(logger))

	answer := func(ctx context.Context, painted int) (*shot, error) {
		out := &shot{Width: Size, Height: Size, Painted: painted}
		if err := out.PNG(cv.snapshot()); err != nil {
			return nil, err
		}
		if painted > 0 {
			if err := srv.Updated(ctx, ImageURI); err != nil {
				envserver.Logger(ctx).Warn("notify subscribers", "error", err)
			}
		}
		return out, nil
	}
	paint := func(x0, y0, w, h int, c color.RGBA) int {
		cv.mu.Lock()
		defer cv.mu.Unlock()
		n := 0
		for y := max(y0, 0); y < min(y0+h, Size); y++ {
			for x := max(x0, 0); x < min(x0+w, Size); x++ {
				cv.img.SetRGBA(x, y, c)
				n++
			}
		}
		return n
	}
	lookup := func(name string) (color.RGBA, error) {
		c, ok := palette[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return c, fmt.Errorf("no color %q; the palette: %s", name, strings.Join(colorNames(), ", "))
		}
		return c, nil
	}

	var errs []error
	add := func(_ any, err error) { errs = append(errs, err) }
	add(envserver.AddTool(srv, "draw_rect", "Paint a rectangle; answers a screenshot", func(ctx context.Context, in rectArgs) (*shot, error) {
		c, err := lookup(in.Color)
		if err != nil {
			return nil, err
		}
		n := paint(in.X, in.Y, in.Width, in.Height, c)
		envserver.Logger(ctx).Info("painted a rectangle", "pixels", n, "color", in.Color)
		return answer(ctx, n)
	}))
	add(envserver.AddTool(srv, "fill", "Paint the whole canvas, row band by row band, reporting progress", func(ctx context.Context, in fillArgs) (*shot, error) {
		c, err := lookup(in.Color)
		if err != nil {
			return nil, err
		}
		const bands = 8
		n := 0
		for b := range bands {
			n += paint(0, b*Size/bands, Size, Size/bands, c)
			time.Sleep(10 * time.Millisecond) // a band takes a while, as real work does
			if err := envserver.Progress(ctx, float64(b+1), bands, fmt.Sprintf("band %d of %d", b+1, bands)); err != nil {
				return nil, err
			}
		}
		envserver.Logger(ctx).Info("filled the canvas", "color", in.Color)
		return answer(ctx, n)
	}))
	add(envserver.AddTool(srv, "screenshot", "See the canvas", func(ctx context.Context, _ struct{}) (*shot, error) {
		return answer(ctx, 0)
	}))
	add(envserver.AddTool(srv, "beep", "A short beep (audio content), for agents that listen", func(ctx context.Context, _ struct{}) (*struct{ envserver.Content }, error) {
		out := &struct{ envserver.Content }{}
		out.Audio(beepWAV(), "audio/wav")
		return out, nil
	}))
	add(envserver.AddTool(srv, "export", "The canvas as an embedded PNG resource and a link to the live one", func(ctx context.Context, _ struct{}) (*struct{ envserver.Content }, error) {
		var b bytes.Buffer
		if err := png.Encode(&b, cv.snapshot()); err != nil {
			return nil, err
		}
		out := &struct{ envserver.Content }{}
		out.Resource("canvas://export.png", "image/png", b.Bytes())
		out.Link(ImageURI, "the live canvas", "image/png")
		return out, nil
	}))

	errs = append(errs,
		srv.Resource(ImageURI, "The canvas as a PNG image; subscribe to hear of changes", func(ctx context.Context) (any, error) {
			var b bytes.Buffer
			if err := png.Encode(&b, cv.snapshot()); err != nil {
				return nil, err
			}
			return envserver.Blob{MIMEType: "image/png", Data: b.Bytes()}, nil
		}),
		srv.ResourceTemplate("canvas://palette/{color}", "A palette color's RGB", func(ctx context.Context, uri string) (any, error) {
			name := strings.TrimPrefix(uri, "canvas://palette/")
			c, err := lookup(name)
			if err != nil {
				return nil, err
			}
			return map[string]any{"color": name, "rgb": []int{int(c.R), int(c.G), int(c.B)}}, nil
		}))
	completeColor := func(ctx context.Context, value string, _ map[string]string) ([]string, error) {
		var out []string
		for _, n := range colorNames() {
			if strings.HasPrefix(n, strings.ToLower(value)) {
				out = append(out, n)
			}
		}
		return out, nil
	}
	srv.CompleteResourceArgument("canvas://palette/{color}", "color", completeColor)
	srv.CompletePromptArgument("draw-square", "color", completeColor)

	setup := envserver.NewHub(envserver.SetupHub)
	add(envserver.AddTool(setup, "clear", "Make the canvas white", func(ctx context.Context, _ squareArgs) (map[string]int, error) {
		env, _ := envserver.Env[*canvas](ctx)
		env.clear()
		return map[string]int{"size": Size}, srv.Updated(ctx, ImageURI)
	}))
	add(envserver.AddTool(setup, "mark", "Make the canvas white but for a square of the task's color in its top-left corner", func(ctx context.Context, in squareArgs) (map[string]int, error) {
		env, _ := envserver.Env[*canvas](ctx)
		c, err := lookup(in.Color)
		if err != nil {
			return nil, err
		}
		env.clear()
		paint(0, 0, MarkerSize, MarkerSize, c)
		return map[string]int{"size": Size, "marker": MarkerSize}, srv.Updated(ctx, ImageURI)
	}))
	evaluate := envserver.NewHub(envserver.EvaluateHub)
	add(envserver.AddTool(evaluate, "square_drawn", "Reward the share of the square's pixels that have its color", func(ctx context.Context, in squareArgs) (envserver.EvaluationResult, error) {
		env, _ := envserver.Env[*canvas](ctx)
		want, err := lookup(in.Color)
		if err != nil {
			return envserver.EvaluationResult{}, err
		}
		img := env.snapshot()
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
	}))
	errs = append(errs, srv.Mount(setup), srv.Mount(evaluate))
	errs = append(errs, envserver.AddScenario(srv, envserver.Scenario[squareArgs]{
		Name:        "draw-square",
		Title:       "Draw a square",
		Description: "On a white canvas, paint a square of a palette color.",
		Prompt:      `Paint a {{.Color}} square of side {{.Size}} pixels whose top-left corner is at ({{.X}}, {{.Y}}).`,
		Setup:       envserver.Call{Tool: envserver.SetupHub, Name: "clear"},
		Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: "square_drawn"},
	}))
	// The color to paint is only in the picture: an agent that cannot see the screenshot can only
	// guess it.
	errs = append(errs, envserver.AddScenario(srv, envserver.Scenario[squareArgs]{
		Name:        "copy-color",
		Title:       "Copy a color you can only see",
		Description: "The canvas shows a small square in its top-left corner; paint a square of the same color elsewhere. The prompt does not name the color.",
		Prompt: `The top-left corner of the canvas holds a small colored square. Paint a square of that same color, of side {{.Size}} pixels, ` +
			`whose top-left corner is at ({{.X}}, {{.Y}}). Take a screenshot to see it.`,
		Setup:    envserver.Call{Tool: envserver.SetupHub, Name: "mark"},
		Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "square_drawn"},
	}))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return srv, nil
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
