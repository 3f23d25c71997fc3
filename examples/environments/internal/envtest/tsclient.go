package envtest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// TSSDKVersion is the pinned version of @modelcontextprotocol/sdk the TypeScript client runs.
const TSSDKVersion = "1.32.2"

//go:embed tsclient.mjs
var tsClientScript []byte

// TSPlan is what the TypeScript client does once connected.
type TSPlan struct {
	Stdio        *TSStdio       `json:"stdio,omitempty"`
	HTTP         string         `json:"http,omitempty"`
	Calls        []TSCall       `json:"calls,omitempty"`
	Resources    []string       `json:"resources,omitempty"`
	RawResources []string       `json:"raw_resources,omitempty"`
	Prompts      []TSPrompt     `json:"prompts,omitempty"`
	LogLevel     string         `json:"log_level,omitempty"`
	Subscribe    []string       `json:"subscribe,omitempty"`
	Templates    bool           `json:"templates,omitempty"`
	Completions  []TSCompletion `json:"completions,omitempty"`
}

// TSCompletion is a completion/complete.
type TSCompletion struct {
	Ref      map[string]string `json:"ref"`
	Argument map[string]string `json:"argument"`
}

// TSStdio is the command the TypeScript client spawns.
type TSStdio struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// TSCall is a tools/call.
type TSCall struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments,omitempty"`
	Progress  bool   `json:"progress,omitempty"`
}

// TSContent is a content block as the TypeScript client reports it (binary data by size and
// first bytes, in hex).
type TSContent struct {
	Type     string `json:"type"`
	MIMEType string `json:"mimeType"`
	Bytes    int    `json:"bytes"`
	Head     string `json:"head"`
	Text     string `json:"text"`
}

// TSPrompt is a prompts/get.
type TSPrompt struct {
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments,omitempty"`
}

// TSResult is what the TypeScript client reports.
type TSResult struct {
	ServerInfo   struct{ Name, Version string } `json:"serverInfo"`
	Instructions string                         `json:"instructions"`
	Tools        []struct {
		Name         string         `json:"name"`
		InputSchema  map[string]any `json:"inputSchema"`
		OutputSchema map[string]any `json:"outputSchema"`
		Meta         map[string]any `json:"_meta"`
	} `json:"tools"`
	Calls []struct {
		Name              string         `json:"name"`
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
		Content           []TSContent    `json:"content"`
		Progress          []struct {
			Progress float64 `json:"progress"`
			Total    float64 `json:"total"`
			Message  string  `json:"message"`
		} `json:"progress"`
	} `json:"calls"`
	Resources    map[string]any `json:"resources"`
	RawResources map[string]struct {
		MIMEType  string `json:"mimeType"`
		Text      string `json:"text"`
		BlobBytes int    `json:"blobBytes"`
		Head      string `json:"head"`
	} `json:"raw_resources"`
	Capabilities map[string]any `json:"capabilities"`
	Logs         []struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
		Data   any    `json:"data"`
	} `json:"logs"`
	Updated   []string `json:"updated"`
	Templates []struct {
		URITemplate string `json:"uriTemplate"`
	} `json:"templates"`
	Completions []struct {
		Values []string `json:"values"`
		Total  int      `json:"total"`
	} `json:"completions"`
	Prompts []struct {
		Messages []struct {
			Content struct{ Text string } `json:"content"`
		} `json:"messages"`
		Meta map[string]any `json:"_meta"`
	} `json:"prompts"`
	Error string `json:"error"`
}

// RunTSClient runs the TypeScript SDK client with plan. It installs the pinned SDK under
// <repo>/.cache/npm the first time. Without node or npm, or when the install fails, the test is
// skipped locally and fails in CI (CI=true).
func RunTSClient(t testing.TB, plan TSPlan) TSResult {
	t.Helper()
	prefix := installTSSDK(t)
	script := filepath.Join(t.TempDir(), "tsclient.mjs")
	if err := os.WriteFile(script, tsClientScript, 0o644); err != nil {
		t.Fatal(err)
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", script, prefix, string(planJSON))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res TSResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("TypeScript client: %v (run: %v)\nstdout:\n%s\nstderr:\n%s", err, runErr, stdout.String(), stderr.String())
	}
	if res.Error != "" || runErr != nil {
		t.Fatalf("TypeScript client failed: %s (run: %v)\nstderr:\n%s", res.Error, runErr, stderr.String())
	}
	return res
}

// installTSSDK makes sure the pinned SDK is installed and returns its npm prefix.
func installTSSDK(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testenv.MissingTool(t, "node")
	}
	prefix := filepath.Join(RepoRoot(t), ".cache", "npm", "mcp-sdk-"+TSSDKVersion)
	marker := filepath.Join(prefix, "node_modules", "@modelcontextprotocol", "sdk", "package.json")
	if installedVersion(marker) == TSSDKVersion {
		return prefix
	}
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.MissingTool(t, "npm")
	}
	// Parallel test binaries may install at once; npm into one prefix concurrently is unsafe.
	unlock, err := testenv.LockFile(prefix + ".lock")
	if err != nil {
		testenv.Unavailable(t, "lock %s: %v", prefix, err)
	}
	defer unlock()
	if installedVersion(marker) == TSSDKVersion {
		return prefix
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", prefix,
		"@modelcontextprotocol/sdk@"+TSSDKVersion)
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Unavailable(t, "npm install @modelcontextprotocol/sdk@%s: %v\n%s", TSSDKVersion, err, out)
	}
	if v := installedVersion(marker); v != TSSDKVersion {
		testenv.Unavailable(t, "npm installed @modelcontextprotocol/sdk %q, want %s", v, TSSDKVersion)
	}
	return prefix
}

func installedVersion(packageJSON string) string {
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}
