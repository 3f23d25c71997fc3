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

// Inventory lists what the environment serves, by name, for a build's lock: every tool (the
// hub dispatchers included) as {name, description, input_schema, role} (role: the tool's
// _meta["proctor/role"], "setup", "evaluate" or "hub" for a hub's dispatcher, absent for a tool
// an agent uses), every prompt as {name, description}, every resource as {uri, name}.
func (e *Env) Inventory(ctx context.Context) (map[string]any, error) {
	tools, prompts, resources := []any{}, []any{}, []any{}
	for t, err := range e.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", classify(err))
		}
		entry := map[string]any{"name": t.Name, "description": t.Description}
		if schema, err := toMap(t.InputSchema); err == nil && schema != nil {
			entry["input_schema"] = schema
		}
		if role, _ := t.Meta[MetaRole].(string); role != "" {
			entry["role"] = role
		}
		tools = append(tools, entry)
	}
	caps := e.session.InitializeResult()
	if caps != nil && caps.Capabilities != nil && caps.Capabilities.Prompts != nil {
		for p, err := range e.session.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("list prompts: %w", classify(err))
			}
			prompts = append(prompts, map[string]any{"name": p.Name, "description": p.Description})
		}
	}
	if caps != nil && caps.Capabilities != nil && caps.Capabilities.Resources != nil {
		for r, err := range e.session.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("list resources: %w", classify(err))
			}
			resources = append(resources, map[string]any{"uri": r.URI, "name": r.Name})
		}
	}
	return map[string]any{"tools": tools, "prompts": prompts, "resources": resources}, nil
}
