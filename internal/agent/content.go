package agent

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Image is an image a tool result carried: the model is shown it with the result.
//
// Its bytes never travel as JSON. Where a conversation is stored (the trace), the image is kept in
// object storage under Key, and whoever rebuilds the conversation for a model call reads the
// bytes back into Data; RunEpisode, which keeps its conversation in memory, passes Data along.
type Image struct {
	// MIMEType is the image's type, "image/png" for a screenshot.
	MIMEType string `json:"mime_type"`
	// Data is the image itself, decoded (not base64).
	Data []byte `json:"-"`
	// Size is len(Data), and SHA256 its hex digest: they stay when Data is dropped.
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
	// Key is where object storage keeps the image, once stored.
	Key string `json:"key,omitempty"`
}

// NewImage describes data as an image of type mimeType.
func NewImage(mimeType string, data []byte) Image {
	sum := sha256.Sum256(data)
	return Image{MIMEType: mimeType, Data: data, Size: len(data), SHA256: hex.EncodeToString(sum[:])}
}

// Extension is the file extension of the image's type, for a stored object's key.
func (im Image) Extension() string {
	switch im.MIMEType {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	}
	return ""
}

// ModelImageTypes are the image types both providers accept in a conversation; an image of
// another type is replaced by a note saying so.
var ModelImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// modelCanSee reports whether im can be sent to a model: of a type the providers accept, and with
// its bytes at hand.
func modelCanSee(im Image) bool {
	if len(im.Data) == 0 {
		return false
	}
	for _, t := range ModelImageTypes {
		if im.MIMEType == t {
			return true
		}
	}
	return false
}

// imageNote is what a model reads in place of an image it cannot be shown.
func imageNote(im Image) string {
	if len(im.Data) == 0 {
		return fmt.Sprintf("[an image (%s, %d bytes) was left out: its bytes were not kept]", im.MIMEType, im.Size)
	}
	return fmt.Sprintf("[an image (%s, %d bytes) was left out: models are shown %s only]", im.MIMEType, im.Size, strings.Join(ModelImageTypes, ", "))
}

// readContent turns an MCP tool result's content into what a model reads: the text parts, and
// for what is not text, the images to show and notes on what was left out. Audio is left out
// (the adapters send no audio: a model that takes none would refuse the whole request);
// embedded resources give their text, or their image; resource links are named.
func readContent(content []mcp.Content) (text string, images []Image) {
	var parts []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			images = append(images, NewImage(c.MIMEType, c.Data))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio (%s, %d bytes) was left out: models are not sent audio]", c.MIMEType, len(c.Data)))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
			case r.Text != "":
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			case strings.HasPrefix(r.MIMEType, "image/"):
				parts = append(parts, fmt.Sprintf("[resource %s: the image below]", r.URI))
				images = append(images, NewImage(r.MIMEType, r.Blob))
			default:
				parts = append(parts, fmt.Sprintf("[resource %s (%s, %d bytes) was left out: models are sent text and images only]", r.URI, cmp.Or(r.MIMEType, "no type"), len(r.Blob)))
			}
		case *mcp.ResourceLink:
			desc := c.URI
			if c.Name != "" {
				desc += ", " + c.Name
			}
			if c.MIMEType != "" {
				desc += ", " + c.MIMEType
			}
			parts = append(parts, "[a link to the resource "+desc+"]")
		}
	}
	return strings.Join(parts, "\n"), images
}
