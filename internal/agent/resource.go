package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ReadResource reads a resource of the environment and returns its first content: the text, or
// the bytes of a blob. The platform reads scenarios://list with it to discover a build's scenarios.
func (e *Env) ReadResource(ctx context.Context, uri string) ([]byte, error) {
	res, err := e.session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, fmt.Errorf("read resource %s: %w", uri, classify(err))
	}
	if len(res.Contents) == 0 {
		return nil, errors.New("read resource " + uri + ": no content")
	}
	c := res.Contents[0]
	if c.Blob != nil {
		return c.Blob, nil
	}
	return []byte(c.Text), nil
}
