package harbor

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"
)

// What an imported task is to the platform: a task of the shell server's scenario Scenario on
// its environment, with Args as the scenario's arguments and the oracle's validation calls
// writing the solution and running it.
const (
	// Scenario is the shell server's one scenario: the prompt is the task's instruction; setup
	// prepares /logs; evaluate runs the verifier.
	Scenario = "harbor"
	// SetupFunc and VerifyFunc are the scenario's setup and evaluate hub functions.
	SetupFunc  = "prepare"
	VerifyFunc = "verify"

	// ExecTool and WriteFileTool are the shell server's visible tools.
	ExecTool         = "exec"
	WriteFileTool    = "write_file"
	TerminalSendTool = "terminal_send"
	TerminalReadTool = "terminal_read"

	// TestsDir, SolutionDir and LogsDir are where Harbor's layout puts them in the sandbox.
	// TimeoutMultiplierEnv is the variable a sandbox finds its job's timeout multiplier in
	// (run_list's timeout_multiplier): the verifier's and the healthcheck's times scale by it.
	TimeoutMultiplierEnv = "PROCTOR_TIMEOUT_MULTIPLIER"

	TestsDir    = "/tests"
	SolutionDir = "/solution"
	LogsDir     = "/logs"
)

// Args are the arguments of the shell server's harbor scenario.
type Args struct {
	Instruction string `json:"instruction" jsonschema:"the task's instruction.md: the agent's prompt"`
	// Tests are tests/, written to /tests only when the verifier runs (never visible before).
	Tests              []WireFile        `json:"tests" jsonschema:"the files of the task's tests/ folder, put at /tests when the verifier runs"`
	VerifierTimeoutSec float64           `json:"verifier_timeout_sec" jsonschema:"seconds bash /tests/test.sh may run"`
	VerifierEnv        map[string]string `json:"verifier_env,omitempty" jsonschema:"environment variables of the verifier"`
	// Env is [environment].env: values that may name the sandbox's own variables (the launching
	// member's secrets, the environment's variables) as ${NAME} or ${NAME:-default}.
	Env map[string]string `json:"env,omitempty" jsonschema:"the task's environment variables ([environment].env), resolved in the sandbox: ${NAME} and ${NAME:-default} name the sandbox's own variables (the member's secrets, the environment's variables)"`
	// Healthcheck, when set, gates the start: setup waits for it to pass.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty" jsonschema:"[environment.healthcheck]: setup runs it until it passes, or fails the start once it is unhealthy"`
	// AgentUser and VerifierUser are [agent].user and [verifier].user: who the agent's commands
	// (and the oracle's solve.sh) and test.sh run as; "" is the image's user.
	AgentUser    string `json:"agent_user,omitempty" jsonschema:"[agent].user: the user (a name of the image's /etc/passwd, or a uid) the agent's commands and the solution run as"`
	VerifierUser string `json:"verifier_user,omitempty" jsonschema:"[verifier].user: the user test.sh runs as"`
}

// AgentUser is the agent's user in a task's arguments of the harbor scenario (Args.AgentUser),
// "" for none: what a brought agent inside the task runs as.
func AgentUser(args map[string]any) string {
	u, _ := args["agent_user"].(string)
	return u
}

// WireFile is a File as arguments carry it: its content in standard base64.
type WireFile struct {
	Path   string `json:"path" jsonschema:"slash-separated path relative to its folder"`
	Base64 string `json:"base64" jsonschema:"the file's content, standard base64"`
	Mode   int    `json:"mode,omitempty" jsonschema:"permission bits (default 0644)"`
}

// Wire turns files into their wire form.
func Wire(files []File) []WireFile {
	out := make([]WireFile, len(files))
	for i, f := range files {
		out[i] = WireFile{Path: f.Path, Base64: base64.StdEncoding.EncodeToString(f.Content), Mode: int(f.Mode)}
	}
	return out
}

// Decode checks a wire file's path (relative, inside its folder) and decodes its content.
func (w WireFile) Decode() (File, error) {
	clean := path.Clean(w.Path)
	if w.Path == "" || path.IsAbs(w.Path) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return File{}, fmt.Errorf("file path %q: a relative path inside its folder", w.Path)
	}
	b, err := base64.StdEncoding.DecodeString(w.Base64)
	if err != nil {
		return File{}, fmt.Errorf("file %s: content is not standard base64: %w", w.Path, err)
	}
	mode := uint32(w.Mode) & 0o777
	if mode == 0 {
		mode = 0o644
	}
	return File{Path: clean, Content: b, Mode: mode}, nil
}

// ScenarioArgs are the task's arguments of the harbor scenario.
func (t *Task) ScenarioArgs() Args {
	agent, _ := userName(t.Config.Agent.User)
	verifier, _ := userName(t.Config.Verifier.User)
	return Args{Instruction: t.Instruction, Tests: Wire(t.Tests), VerifierTimeoutSec: t.VerifierTimeoutSec(), VerifierEnv: t.Config.Verifier.Env, Env: t.Config.Environment.Env,
		Healthcheck: t.Config.Environment.Healthcheck, AgentUser: agent, VerifierUser: verifier}
}

// ValidationCall is one call of the oracle's script, as a task's validation holds it.
type ValidationCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// Validation is the oracle's script: write solution/ to /solution, then run
// `bash /solution/solve.sh` in the image's working directory with [solution].env, within the
// agent's time. A task without a solution has none.
func (t *Task) Validation() []ValidationCall {
	if len(t.Solution) == 0 {
		return nil
	}
	var calls []ValidationCall
	for _, f := range Wire(t.Solution) {
		calls = append(calls, ValidationCall{Name: WriteFileTool, Arguments: map[string]any{
			"path": path.Join(SolutionDir, f.Path), "base64": f.Base64, "mode": f.Mode}})
	}
	// Harbor's `bash solve.sh`; sh where the image has no bash.
	run := map[string]any{"command": `"$(command -v bash || echo sh)" ` + SolutionDir + "/solve.sh", "timeout_sec": t.AgentTimeoutSec()}
	if len(t.Config.Solution.Env) > 0 {
		env := map[string]any{}
		for k, v := range t.Config.Solution.Env {
			env[k] = v
		}
		run["env"] = env
	}
	return append(calls, ValidationCall{Name: ExecTool, Arguments: run})
}
