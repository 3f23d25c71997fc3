package canvasenv

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/proctorhq/proctor/envserver"
)

// Size is the canvas's side in pixels.
const Size = 64

// palette names the colors tools accept.
var palette = map[string]color.RGBA{
	"white": {255, 255, 255, 255}, "black": {0, 0, 0, 255}, "red": {220, 30, 30, 255},
	"green": {30, 160, 60, 255}, "blue": {30, 80, 220, 255}, "yellow": {240, 200, 20, 255},
}

// Palette returns the colors tools accept, by name.
func Palette() map[string]color.RGBA { return maps.Clone(palette) }

// colorNames returns the names of the palette, sorted.
func colorNames() []string {
	names := make([]string, 0, len(palette))
	for n := range palette {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// canvas is the environment's state. It tells the subscribers of ImageURI of each change
// through the server it is registered on.
type canvas struct {
	mu  sync.Mutex
	img *image.RGBA
	srv *envserver.Server
}

// reset makes the canvas white.
func (c *canvas) reset() {
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

// paint paints the part of a rectangle that lies on the canvas and returns how many pixels
// that was.
func (c *canvas) paint(x0, y0, w, h int, col color.RGBA) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for y := max(y0, 0); y < min(y0+h, Size); y++ {
		for x := max(x0, 0); x < min(x0+w, Size); x++ {
			c.img.SetRGBA(x, y, col)
			n++
		}
	}
	return n
}

// encodePNG encodes a snapshot of the canvas.
func (c *canvas) encodePNG() ([]byte, error) {
	var b bytes.Buffer
	if err := png.Encode(&b, c.snapshot()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// lookup returns the palette color called name (in any case, surrounding space ignored).
func lookup(name string) (color.RGBA, error) {
	c, ok := palette[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return c, fmt.Errorf("no color %q; the palette: %s", name, strings.Join(colorNames(), ", "))
	}
	return c, nil
}
