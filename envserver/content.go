package envserver

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"mime"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Content carries the content blocks of a typed tool's result (screenshots, audio, resources)
// beside its structured output. Embed it in the output type: it adds nothing to the output's
// schema or JSON, and the blocks it collects are sent first, followed by the structured output as
// JSON text when the output has any fields.
//
//	type Screen struct {
//		Width, Height int
//		envserver.Content
//	}
//	envserver.MustAddTool(srv, "screenshot", "The screen", func(ctx context.Context, _ struct{}) (*Screen, error) {
//		out := &Screen{Width: 1920, Height: 1080}
//		return out, out.PNG(img)
//	})
type Content struct {
	blocks []mcp.Content
}

// contentCarrier is an output with content blocks of its own.
type contentCarrier interface {
	toolContent() []mcp.Content
}

func (c Content) toolContent() []mcp.Content { return c.blocks }

// Blocks returns the blocks collected so far.
func (c Content) Blocks() []mcp.Content { return c.blocks }

// Add appends SDK content blocks as they are.
func (c *Content) Add(blocks ...mcp.Content) { c.blocks = append(c.blocks, blocks...) }

// Text appends a text block.
func (c *Content) Text(s string) { c.Add(&mcp.TextContent{Text: s}) }

// Image appends an image already encoded as mimeType (image/png, image/jpeg, ...).
func (c *Content) Image(data []byte, mimeType string) {
	c.Add(&mcp.ImageContent{Data: data, MIMEType: mimeType})
}

// PNG encodes img as a PNG image block.
func (c *Content) PNG(img image.Image) error {
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return err
	}
	c.Image(b.Bytes(), "image/png")
	return nil
}

// JPEG encodes img as a JPEG image block of quality 1 to 100.
func (c *Content) JPEG(img image.Image, quality int) error {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: quality}); err != nil {
		return err
	}
	c.Image(b.Bytes(), "image/jpeg")
	return nil
}

// Audio appends audio encoded as mimeType (audio/wav, audio/mpeg, ...).
func (c *Content) Audio(data []byte, mimeType string) {
	c.Add(&mcp.AudioContent{Data: data, MIMEType: mimeType})
}

// Link appends a link to a resource the client may read (resources/read) or a URL.
func (c *Content) Link(uri, name, mimeType string) {
	c.Add(&mcp.ResourceLink{URI: uri, Name: name, MIMEType: mimeType})
}

// Resource embeds a resource's contents: as text when mimeType is textual (text/*, JSON, XML,
// YAML, JavaScript), else as a blob.
func (c *Content) Resource(uri, mimeType string, data []byte) {
	rc := &mcp.ResourceContents{URI: uri, MIMEType: mimeType}
	if isText(mimeType) {
		rc.Text = string(data)
	} else {
		rc.Blob = data
	}
	c.Add(&mcp.EmbeddedResource{Resource: rc})
}

// isText says whether a media type's bytes are text.
func isText(mimeType string) bool {
	mt, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		mt = strings.ToLower(mimeType)
	}
	if strings.HasPrefix(mt, "text/") {
		return true
	}
	for _, suffix := range []string{"json", "xml", "yaml", "javascript", "toml"} {
		if strings.HasSuffix(mt, "/"+suffix) || strings.HasSuffix(mt, "+"+suffix) {
			return true
		}
	}
	return false
}
