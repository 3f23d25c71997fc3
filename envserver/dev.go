package envserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Overview is the body of GET /proctor.
type Overview struct {
	Name         string   `json:"name"`
	Version      string   `json:"version"`
	Instructions string   `json:"instructions,omitempty"`
	Transport    string   `json:"transport"`
	Endpoint     string   `json:"endpoint"`
	Tools        int      `json:"tools"`
	HiddenTools  int      `json:"hidden_tools"`
	Hubs         []string `json:"hubs"`
	Resources    int      `json:"resources"`
	Templates    int      `json:"resource_templates"`
	Prompts      int      `json:"prompts"`
	Scenarios    int      `json:"scenarios"`
}

// ToolInfo is one entry of GET /proctor/tools.
type ToolInfo struct {
	Name         string   `json:"name"`
	Title        string   `json:"title,omitempty"`
	Description  string   `json:"description,omitempty"`
	InputSchema  any      `json:"input_schema"`
	OutputSchema any      `json:"output_schema,omitempty"`
	Meta         mcp.Meta `json:"meta,omitempty"`
	// Hidden marks a hub's inner tool, reachable only through the hub's dispatcher (Hub).
	Hidden bool   `json:"hidden"`
	Hub    string `json:"hub,omitempty"`
}

// ResourcesInfo is the body of GET /proctor/resources.
type ResourcesInfo struct {
	Resources []*mcp.Resource         `json:"resources"`
	Templates []*mcp.ResourceTemplate `json:"templates"`
}

// devRoutes adds the read-only development endpoints. They describe the server as an MCP
// client sees it (through an in-process session), so tools, resources and prompts added
// directly on the SDK server appear too.
func (s *Server) devRoutes(mux *http.ServeMux, transport string) {
	endpoint := HTTPPath
	if transport == "sse" {
		endpoint = SSEPath
	}
	mux.HandleFunc("GET "+DevPath, func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.introspect(r.Context())
		if err != nil {
			devError(w, err)
			return
		}
		hubs := []string{}
		hidden := 0
		for _, t := range snap.tools {
			if t.Hidden {
				hidden++
			}
		}
		s.mu.Lock()
		for _, h := range s.hubs {
			hubs = append(hubs, h.name)
		}
		scenarios := len(s.scenarios)
		s.mu.Unlock()
		devJSON(w, Overview{
			Name: s.name, Version: s.version, Instructions: s.instructions,
			Transport: transport, Endpoint: endpoint,
			Tools: len(snap.tools) - hidden, HiddenTools: hidden, Hubs: hubs,
			Resources: len(snap.resources.Resources), Templates: len(snap.resources.Templates),
			Prompts: len(snap.prompts), Scenarios: scenarios,
		})
	})
	mux.HandleFunc("GET "+DevPath+"/tools", func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.introspect(r.Context())
		if err != nil {
			devError(w, err)
			return
		}
		devJSON(w, map[string]any{"tools": snap.tools})
	})
	mux.HandleFunc("GET "+DevPath+"/resources", func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.introspect(r.Context())
		if err != nil {
			devError(w, err)
			return
		}
		devJSON(w, snap.resources)
	})
	mux.HandleFunc("GET "+DevPath+"/prompts", func(w http.ResponseWriter, r *http.Request) {
		snap, err := s.introspect(r.Context())
		if err != nil {
			devError(w, err)
			return
		}
		devJSON(w, map[string]any{"prompts": snap.prompts})
	})
}

func devJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func devError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "introspection_failed", "message": err.Error()}})
}

type snapshot struct {
	tools     []ToolInfo
	resources ResourcesInfo
	prompts   []*mcp.Prompt
}

// introspect lists the server's features through an in-memory client session. The session is
// marked internal so that looking at the server never triggers the initialize hook.
func (s *Server) introspect(ctx context.Context) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, serverT, nil)
	if err != nil {
		return nil, fmt.Errorf("introspect: connect: %w", err)
	}
	s.mu.Lock()
	s.internal[ss] = true
	s.mu.Unlock()
	defer func() {
		_ = ss.Close()
		s.mu.Lock()
		delete(s.internal, ss)
		s.mu.Unlock()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "envserver-introspection", Version: "1"}, nil)
	cs, err := client.Connect(ctx, clientT, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return nil, fmt.Errorf("introspect: initialize: %w", err)
	}
	defer cs.Close()

	snap := &snapshot{
		tools:     []ToolInfo{},
		resources: ResourcesInfo{Resources: []*mcp.Resource{}, Templates: []*mcp.ResourceTemplate{}},
		prompts:   []*mcp.Prompt{},
	}
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	if caps.Tools != nil {
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("introspect: list tools: %w", err)
			}
			snap.tools = append(snap.tools, ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Meta: t.Meta})
		}
	}
	s.mu.Lock()
	hubs := append([]*Hub(nil), s.hubs...)
	s.mu.Unlock()
	for _, h := range hubs {
		for _, t := range h.Tools() {
			snap.tools = append(snap.tools, ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Meta: t.Meta, Hidden: true, Hub: h.name})
		}
	}
	if caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("introspect: list resources: %w", err)
			}
			snap.resources.Resources = append(snap.resources.Resources, r)
		}
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("introspect: list resource templates: %w", err)
			}
			snap.resources.Templates = append(snap.resources.Templates, t)
		}
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("introspect: list prompts: %w", err)
			}
			snap.prompts = append(snap.prompts, p)
		}
	}
	return snap, nil
}
