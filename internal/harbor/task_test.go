package harbor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTask writes a task directory: task.toml, an instruction, a Dockerfile, tests/test.sh and
// solution/solve.sh, with files overriding or adding any of them ("" removes one).
func writeTask(t *testing.T, toml string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hello-task")
	all := map[string]string{
		"task.toml":              toml,
		"instruction.md":         "Create /app/hello.txt holding Hello, world!\n",
		"environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
		"tests/test.sh":          "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
		"solution/solve.sh":      "#!/bin/bash\necho 'Hello, world!' > /app/hello.txt\n",
	}
	for k, v := range files {
		all[k] = v
	}
	for name, content := range all {
		if content == "" && name != "task.toml" {
			continue
		}
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// terminalBench2 is task.toml as Terminal-Bench 2 writes it.
const terminalBench2 = `version = "1.0"

[metadata]
author_name = "A. Author"
author_email = "a@example.com"
difficulty = "medium"
category = "file-operations"
tags = ["file-operations", "bash"]
expert_time_estimate_min = 5.0

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "example/hello:20251031"
cpus = 1
memory_mb = 2048
storage_mb = 10240
`

func TestATerminalBench2TaskReads(t *testing.T) {
	dir := writeTask(t, terminalBench2, nil)
	task, err := Read(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(task.Refusals) != 1 || !strings.Contains(task.Refusals[0], "storage_mb = 10240") || !strings.Contains(task.Refusals[0], "--allow-unenforced storage_mb") {
		t.Errorf("refusals = %q, want storage_mb's alone, saying how to accept it", task.Refusals)
	}
	task, err = Read(dir, Options{AllowUnenforced: []string{"storage_mb"}})
	if err != nil || len(task.Refusals) != 0 {
		t.Fatalf("with storage_mb accepted: %v %q", err, task.Refusals)
	}
	if task.Name != "hello-task" || task.AgentTimeoutSec() != 900 || task.VerifierTimeoutSec() != 900 || *task.Config.Environment.MemoryMB != 2048 {
		t.Errorf("task = %+v", task)
	}
	if task.Config.Metadata["difficulty"] != "medium" || task.Config.Metadata["expert_time_estimate_min"] != 5.0 {
		t.Errorf("metadata = %v", task.Config.Metadata)
	}
	if !slices.ContainsFunc(task.Notes, func(n string) bool {
		return strings.Contains(n, "docker_image example/hello:20251031: built from environment/Dockerfile")
	}) {
		t.Errorf("notes = %q, want the docker_image not pulled said", task.Notes)
	}
	if mode, err := task.Network(); mode != NetworkPublic || err != nil {
		t.Errorf("network = %q %v", mode, err)
	}
	args := task.ScenarioArgs()
	if args.Instruction != "Create /app/hello.txt holding Hello, world!\n" || len(args.Tests) != 1 || args.Tests[0].Path != "test.sh" || args.VerifierTimeoutSec != 900 {
		t.Errorf("scenario args = %+v", args)
	}
	calls := task.Validation()
	if len(calls) != 2 || calls[0].Name != WriteFileTool || calls[0].Arguments["path"] != "/solution/solve.sh" ||
		calls[1].Name != ExecTool || calls[1].Arguments["command"] != `"$(command -v bash || echo sh)" /solution/solve.sh` || calls[1].Arguments["timeout_sec"] != 900.0 {
		t.Errorf("validation = %+v", calls)
	}
}

func TestAHarborSchemaTaskReads(t *testing.T) {
	dir := writeTask(t, `schema_version = "1.4"

[task]
name = "proctor/no-net"
description = "No network"
keywords = ["network"]
authors = [{ name = "P", email = "p@example.com" }]

[agent]
timeout_sec = 120

[solution]
env = { MODE = "offline" }

[environment]
network_mode = "no-network"
cpus = 2
gpus = 1
gpu_types = ["h100"]
`, nil)
	task, err := Read(dir, Options{})
	if err != nil || len(task.Refusals) != 0 {
		t.Fatalf("%v %q", err, task.Refusals)
	}
	if task.Name != "proctor/no-net" || task.Config.Task.Keywords[0] != "network" || task.Config.Task.Authors[0].Email != "p@example.com" {
		t.Errorf("package = %+v", task.Config.Task)
	}
	if mode, _ := task.Network(); mode != NetworkNone {
		t.Errorf("network = %q", mode)
	}
	if calls := task.Validation(); calls[1].Arguments["env"].(map[string]any)["MODE"] != "offline" {
		t.Errorf("the oracle's run = %+v, want solution.env", calls[1])
	}
}

// The agent's and the verifier's users, a name or a uid, travel in the scenario's arguments.
func TestTaskUsersReachTheShellServer(t *testing.T) {
	task, err := Read(writeTask(t, "[agent]\nuser = \"agent\"\n[verifier]\nuser = 0\n", nil), Options{})
	if err != nil || len(task.Refusals) != 0 {
		t.Fatalf("%v %q", err, task.Refusals)
	}
	if a := task.ScenarioArgs(); a.AgentUser != "agent" || a.VerifierUser != "0" {
		t.Errorf("args users = %q, %q; want agent, 0", a.AgentUser, a.VerifierUser)
	}
}

func TestTheImportRefusesWhatItDoesNotHonour(t *testing.T) {
	for name, c := range map[string]struct {
		toml  string
		files map[string]string
		want  []string
	}{
		"unknown fields":      {toml: "version = \"1.0\"\nos = \"windows\"\n[environment]\ntpus = 4\n", want: []string{"os: not a field Proctor knows", "environment.tpus: not a field"}},
		"steps and artifacts": {toml: "schema_version = \"1.4\"\n[[steps]]\nname = \"a\"\n[[artifacts]]\nsource = \"/x\"\n", want: []string{"[[steps]]", "[[artifacts]]"}},
		"users that are none": {toml: "[agent]\nuser = \"\"\n[verifier]\nuser = -1\n", want: []string{"agent.user", "verifier.user = -1"}},
		"several gpu types and a bad reference": {toml: "[environment]\ngpu_types = [\"h100\", \"a100\"]\nenv = { TOKEN = \"${TOKEN\", \"9X\" = \"1\" }\n",
			want: []string{"gpu_types", "environment.env.TOKEN", "environment.env.9X: not a variable name"}},
		"a bad healthcheck and mcp servers": {toml: "[environment.healthcheck]\ncommand = \"true\"\nretries = 0\nfrequency = 2\n[[environment.mcp_servers]]\nname = \"x\"\ncommand = \"y\"\n",
			want: []string{"healthcheck.retries = 0", "environment.healthcheck.frequency: not a field", "mcp_servers"}},
		"a bad network":           {toml: "[environment]\nnetwork_mode = \"private\"\n", want: []string{"network_mode \"private\""}},
		"allowlist without hosts": {toml: "[environment]\nnetwork_mode = \"allowlist\"\n", want: []string{"name its allowed_hosts"}},
		"a long build":            {toml: "[environment]\nbuild_timeout_sec = 7200\n", want: []string{"bounded at 1800 s"}},
		"a verifier of its own":   {toml: "[verifier]\nenvironment_mode = \"separate\"\n", want: []string{"environment_mode"}},
		"schema 2":                {toml: "schema_version = \"2.0\"\n", want: []string{"schema 1.x"}},
		"no test.sh":              {toml: "", files: map[string]string{"tests/test.sh": "", "tests/other.sh": "x"}, want: []string{"tests/test.sh: missing"}},
		"no instruction":          {toml: "", files: map[string]string{"instruction.md": " \n"}, want: []string{"instruction.md is empty"}},
		"compose":                 {toml: "", files: map[string]string{"environment/Dockerfile": "", "environment/docker-compose.yaml": "services: {}"}, want: []string{"several containers"}},
		"a prebuilt image":        {toml: "[environment]\ndocker_image = \"x/y:1\"\n", files: map[string]string{"environment/Dockerfile": "", "environment/README": "x"}, want: []string{"no registry pull"}},
	} {
		t.Run(name, func(t *testing.T) {
			task, err := Read(writeTask(t, c.toml, c.files), Options{})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(task.Refusals, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("refusals %q do not say %q", task.Refusals, w)
				}
			}
			if len(task.Refusals) != len(c.want) {
				t.Errorf("refusals = %q, want %d", task.Refusals, len(c.want))
			}
		})
	}
	if _, err := Read(writeTask(t, "version = ", nil), Options{}); err == nil || !strings.Contains(err.Error(), "task.toml") {
		t.Errorf("TOML that does not parse: %v", err)
	}
}

func TestBuildContextsHashByContent(t *testing.T) {
	a := writeTask(t, "", map[string]string{"environment/files/data.txt": "1"})
	b := writeTask(t, "", map[string]string{"environment/files/data.txt": "1", "tests/test.sh": "#!/bin/bash\nexit 0\n"})
	ha, _ := HashTree(filepath.Join(a, "environment"))
	hb, _ := HashTree(filepath.Join(b, "environment"))
	if ha == "" || ha != hb {
		t.Errorf("the same context hashed %q and %q", ha, hb)
	}
	os.Chmod(filepath.Join(b, "environment/files/data.txt"), 0o755)
	if hc, _ := HashTree(filepath.Join(b, "environment")); hc == ha {
		t.Error("a mode change kept the hash")
	}
	os.Chmod(filepath.Join(b, "environment/files/data.txt"), 0o644)
	os.WriteFile(filepath.Join(b, "environment/files/data.txt"), []byte("2"), 0o644)
	if hc, _ := HashTree(filepath.Join(b, "environment")); hc == ha {
		t.Error("a content change kept the hash")
	}
	os.Rename(filepath.Join(b, "environment/files/data.txt"), filepath.Join(b, "environment/files/data2.txt"))
	if hc, _ := HashTree(filepath.Join(b, "environment")); hc == ha {
		t.Error("a rename kept the hash")
	}
}

func TestFindTasks(t *testing.T) {
	one := writeTask(t, "", nil)
	if dirs, err := FindTasks(one); err != nil || len(dirs) != 1 || dirs[0] != one {
		t.Errorf("a task dir: %q %v", dirs, err)
	}
	if dirs, err := FindTasks(filepath.Dir(one)); err != nil || len(dirs) != 1 {
		t.Errorf("a dataset of one: %q %v", dirs, err)
	}
	if _, err := FindTasks(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a Harbor task or dataset") {
		t.Errorf("an empty folder: %v", err)
	}
}

func TestEnvironmentValuesNameTheSandboxsVariables(t *testing.T) {
	vars := map[string]string{"API_TOKEN": "sk-1", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for value, want := range map[string]string{
		"${API_TOKEN}":                   "sk-1",
		"Bearer ${API_TOKEN}!":           "Bearer sk-1!",
		"${MISSING:-fallback}":           "fallback",
		"${EMPTY:-fallback}":             "fallback",
		"${EMPTY}":                       "",
		"plain $HOME and $1 and cost $5": "plain $HOME and $1 and cost $5",
	} {
		if got, err := ExpandEnv(value, lookup); err != nil || got != want {
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
	if _, err := ExpandEnv("${MISSING} and ${ALSO}", lookup); err == nil || err.Error() != "MISSING, ALSO not set" {
		t.Errorf("missing references: %v", err)
	}
	if _, err := ExpandEnv("${NOT CLOSED", lookup); err == nil || !strings.Contains(err.Error(), "${NAME} or ${NAME:-default}") {
		t.Errorf("a malformed reference: %v", err)
	}
	task, err := Read(writeTask(t, "[environment]\nenv = { API_TOKEN = \"${API_TOKEN}\", MODE = \"test\" }\n", nil), Options{})
	if err != nil || len(task.Refusals) != 0 || task.ScenarioArgs().Env["API_TOKEN"] != "${API_TOKEN}" || task.ScenarioArgs().Env["MODE"] != "test" {
		t.Errorf("a task with environment.env: %v %q %+v", err, task.Refusals, task.ScenarioArgs().Env)
	}
}

func TestAHealthcheckGatesTheStart(t *testing.T) {
	task, err := Read(writeTask(t, "[environment.healthcheck]\ncommand = \"test -f /app/ready\"\ninterval_sec = 2\ntimeout_sec = 10\nstart_period_sec = 30\nretries = 4\n", nil), Options{})
	if err != nil || len(task.Refusals) != 0 {
		t.Fatalf("%v %q", err, task.Refusals)
	}
	h := task.ScenarioArgs().Healthcheck
	if h == nil || h.Command != "test -f /app/ready" || *h.Retries != 4 || h.Worst() != 30+10+4*(2+10) {
		t.Errorf("healthcheck %+v (worst %v)", h, h.Worst())
	}
}

func TestTheAgentUserIsReadFromTheArguments(t *testing.T) {
	task, err := Read(writeTask(t, "[agent]\nuser = 1000\n", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(task.ScenarioArgs())
	var args map[string]any
	json.Unmarshal(b, &args)
	if got := AgentUser(args); got != "1000" {
		t.Errorf("AgentUser = %q, want 1000", got)
	}
	if got := AgentUser(map[string]any{}); got != "" {
		t.Errorf("AgentUser of no user = %q", got)
	}
}
