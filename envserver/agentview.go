package envserver

import (
	"context"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaAgentView is the initialize _meta key by which a client asks for the agent's view of the
// tools: with it true, tools/list leaves out the setup and evaluate dispatchers (the harness's
// lifecycle tools, which an agent must not call), while tools/call still reaches them.
// Proctor's own agent filters them by [MetaRole] instead; this is for other clients that honour
// it (an MCP client has no standard way to hide a tool).
const MetaAgentView = "proctor/agent_view"

// noteAgentView records whether a session asked for the agent's view, until it ends.
func (s *Server) noteAgentView(ss *mcp.ServerSession, params *mcp.InitializeParams) {
	if ss == nil || params == nil || params.Meta[MetaAgentView] != true {
		return
	}
	s.mu.Lock()
	s.agentView[ss] = true
	s.mu.Unlock()
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.agentView, ss)
		s.mu.Unlock()
	}()
}

// agentViewMiddleware filters tools/list for the sessions that asked for the agent's view.
func (s *Server) agentViewMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/list" || err != nil {
			return res, err
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		s.mu.Lock()
		agent := s.agentView[ss]
		s.mu.Unlock()
		list, ok := res.(*mcp.ListToolsResult)
		if !agent || !ok {
			return res, err
		}
		filtered := *list
		filtered.Tools = slices.DeleteFunc(slices.Clone(list.Tools), func(t *mcp.Tool) bool {
			role := t.Meta[MetaRole]
			return role == SetupHub || role == EvaluateHub
		})
		return &filtered, nil
	}
}
