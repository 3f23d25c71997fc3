package models

// TransportStdio is the MCP transport of an environment that speaks over its stdin and stdout:
// the one the platform uses to reach a sandboxed environment, and so the transport of every
// build that succeeds.
const TransportStdio = "stdio"

// TransportNone is the transport of a brought agent's build: it serves no MCP (an agent is an
// MCP client), and nothing is discovered.
const TransportNone = "none"

// BuildLock is what a build's image serves, as discovery found it by starting the image and
// asking it over MCP (spec: Build › lock). The column, the Build workflow's history and the API
// carry this one type. A build that has not succeeded has the zero lock; one that has always
// names its transport.
type BuildLock struct {
	// Transport is how the image served MCP to discovery (TransportStdio); empty until then.
	Transport string `json:"transport,omitempty" enum:"stdio" doc:"The MCP transport the image serves, as discovery reached it: stdio (the environment's stdin and stdout), the one the platform runs environments over. Absent until the build succeeds"`
	// Tools are every tool the environment lists, the hub dispatchers included.
	Tools []LockTool `json:"tools,omitzero" nullable:"false" doc:"Every tool the environment lists, the hubs' dispatchers included"`
	// Prompts and Resources are what the environment lists, when it offers them.
	Prompts   []LockPrompt   `json:"prompts,omitzero" nullable:"false"`
	Resources []LockResource `json:"resources,omitzero" nullable:"false"`
	// RequiredEnv are the environment variables the environment declares it needs
	// (envserver.WithRequiredEnv), which env-vars/check compares with those configured.
	RequiredEnv []string `json:"required_env,omitempty" nullable:"false" doc:"The environment variables the environment declares it needs"`
}

// LockTool is a tool an environment serves.
type LockTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's arguments as the environment declared it: an
	// open document, kept as given.
	InputSchema map[string]any `json:"input_schema,omitempty"`
	// Role is the tool's _meta["proctor/role"]: setup, evaluate or hub for a hub's dispatcher;
	// empty for a tool an agent uses.
	Role string `json:"role,omitempty" doc:"setup, evaluate or hub for a hub's dispatcher; absent for a tool agents use"`
}

// LockPrompt is a prompt an environment serves.
type LockPrompt struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// LockResource is a resource an environment serves.
type LockResource struct {
	URI  string `json:"uri"`
	Name string `json:"name"`
}

// Listed is l with every list present (empty rather than absent), as the API shows a lock.
func (l BuildLock) Listed() BuildLock {
	l.Tools, l.Prompts, l.Resources = NonNil(l.Tools), NonNil(l.Prompts), NonNil(l.Resources)
	return l
}
