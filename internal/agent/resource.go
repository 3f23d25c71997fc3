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

// Inventory is what an environment serves, by name: what a build's lock records.
type Inventory struct {
	// Tools are every tool, the hub dispatchers included.
	Tools     []ServedTool
	Prompts   []ServedPrompt
	Resources []ServedResource
}

// ServedTool is a tool with its role: the tool's _meta["proctor/role"] ("setup", "evaluate" or
// "hub" for a hub's dispatcher), empty for a tool an agent uses. InputSchema is nil when the tool
// declares none.
type ServedTool struct {
	Tool
	Role string
}

// ServedPrompt is a prompt an environment lists.
type ServedPrompt struct{ Name, Description string }

// ServedResource is a resource an environment lists.
type ServedResource struct{ URI, Name string }

// Inventory lists what the environment serves: every tool (the hub dispatchers included), and
// its prompts and resources when it offers them.
func (e *Env) Inventory(ctx context.Context) (Inventory, error) {
	var inv Inventory
	for t, err := range e.session.Tools(ctx, nil) {
		if err != nil {
			return Inventory{}, fmt.Errorf("list tools: %w", classify(err))
		}
		st := ServedTool{Tool: Tool{Name: t.Name, Description: t.Description}}
		if schema, err := toMap(t.InputSchema); err == nil {
			st.InputSchema = schema
		}
		st.Role, _ = t.Meta[MetaRole].(string)
		inv.Tools = append(inv.Tools, st)
	}
	caps := e.session.InitializeResult()
	if caps != nil && caps.Capabilities != nil && caps.Capabilities.Prompts != nil {
		for p, err := range e.session.Prompts(ctx, nil) {
			if err != nil {
				return Inventory{}, fmt.Errorf("list prompts: %w", classify(err))
			}
			inv.Prompts = append(inv.Prompts, ServedPrompt{Name: p.Name, Description: p.Description})
		}
	}
	if caps != nil && caps.Capabilities != nil && caps.Capabilities.Resources != nil {
		for r, err := range e.session.Resources(ctx, nil) {
			if err != nil {
				return Inventory{}, fmt.Errorf("list resources: %w", classify(err))
			}
			inv.Resources = append(inv.Resources, ServedResource{URI: r.URI, Name: r.Name})
		}
	}
	return inv, nil
}
