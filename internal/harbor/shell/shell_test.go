package shell_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/harbor/shell"
)

// machine is a shell server over real streamable HTTP, its /tests and /logs under a temporary
// directory, and a client session to it.
type machine struct {
	t                 *testing.T
	session           *mcp.ClientSession
	work, tests, logs string
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	return newMachineWith(t, nil)
}

// newMachineWith is newMachine with its config changed by edit (after the directories are set).
func newMachineWith(t *testing.T, edit func(dir string, c *shell.Config)) *machine {
	t.Helper()
	dir := t.TempDir()
	m := &machine{t: t, work: filepath.Join(dir, "app"), tests: filepath.Join(dir, "tests"), logs: filepath.Join(dir, "logs")}
	os.Mkdir(m.work, 0o755)
	// The terminal's interactive shell reads $HOME's startup files: this machine's user's (a
	// pyenv init that waits on a lock, say) are not the test's.
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	t.Setenv("HOME", home)
	cfg := shell.Config{WorkDir: m.work, Tests: m.tests, Logs: m.logs}
	if edit != nil {
		edit(dir, &cfg)
	}
	srv, err := shell.New(slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.HTTPHandler())
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	m.session, err = mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + envserver.HTTPPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.session.Close() })
	return m
}

// call calls a tool and decodes its structured result into out; it returns the tool error's
// text, if the call failed as a tool.
func (m *machine) call(name string, args any, out any) string {
	m.t.Helper()
	res, err := m.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		return strings.Join(text, "\n")
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			m.t.Fatalf("%s: %v in %s", name, err, b)
		}
	}
	return ""
}

func (m *machine) exec(args shell.ExecArgs) shell.ExecResult {
	m.t.Helper()
	var r shell.ExecResult
	if msg := m.call(harbor.ExecTool, args, &r); msg != "" {
		m.t.Fatalf("exec %q: %s", args.Command, msg)
	}
	return r
}

func TestExecRunsCommandsInTheTasksDirectory(t *testing.T) {
	m := newMachine(t)
	r := m.exec(shell.ExecArgs{Command: `pwd; echo oops >&2; exit 3`})
	if r.ExitCode != 3 || strings.TrimSpace(r.Stdout) != m.work || r.Stderr != "oops\n" || r.TimedOut || r.Truncated != "" {
		t.Errorf("exec = %+v, want exit 3 in %s with stderr oops", r, m.work)
	}
	r = m.exec(shell.ExecArgs{Command: `echo "$GREETING" > out.txt; cat "$PWD/out.txt"`, Cwd: m.tests[:len(m.tests)-len("tests")], Env: map[string]string{"GREETING": "hi there"}})
	if r.ExitCode != 0 || r.Stdout != "hi there\n" {
		t.Errorf("exec with cwd and env = %+v", r)
	}
	if msg := m.call(harbor.ExecTool, shell.ExecArgs{Command: "true", Cwd: "/no/such/dir"}, nil); !strings.Contains(msg, "not a directory") {
		t.Errorf("exec in a missing cwd = %q, want it said", msg)
	}
	if msg := m.call(harbor.ExecTool, shell.ExecArgs{Command: " "}, nil); !strings.Contains(msg, "empty") {
		t.Errorf("an empty command = %q", msg)
	}
}

func TestExecKillsWhatRunsPastItsTime(t *testing.T) {
	m := newMachine(t)
	pidFile := filepath.Join(m.work, "pid")
	start := time.Now()
	r := m.exec(shell.ExecArgs{Command: `sleep 300 & echo $! > ` + pidFile + `; sleep 300`, TimeoutSec: 0.5})
	if !r.TimedOut || r.ExitCode != -1 {
		t.Errorf("exec past its time = %+v, want timed out and killed", r)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("the call took %s", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	json.Unmarshal([]byte(strings.TrimSpace(string(b))), &pid)
	// The background child went with its call (it may be a zombie of ours for a moment).
	for i := 0; ; i++ {
		st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			break
		}
		if i > 200 {
			t.Fatalf("the command's background child %d outlived its call: %s", pid, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(pid, 0)
}

// What a call starts in the background lives on after it, as in a container; one that keeps
// the call's output open holds it only briefly.
func TestExecLeavesWhatItStartsInTheBackground(t *testing.T) {
	m := newMachine(t)
	begin := time.Now()
	r := m.exec(shell.ExecArgs{Command: `sleep 2 & echo started`})
	if r.Stdout != "started\n" || r.ExitCode != 0 || time.Since(begin) > 1500*time.Millisecond {
		t.Errorf("a call that leaves sleep 2 holding its output: %+v after %s", r, time.Since(begin))
	}
	m.exec(shell.ExecArgs{Command: `(sleep 0.3; echo later > bg.txt) > /dev/null 2>&1 &`})
	for i := 0; ; i++ {
		if b, _ := os.ReadFile(filepath.Join(m.work, "bg.txt")); string(b) == "later\n" {
			break
		}
		if i == 200 {
			t.Fatal("the background process did not outlive its call")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecCapsItsOutputAndSaysSo(t *testing.T) {
	m := newMachine(t)
	r := m.exec(shell.ExecArgs{Command: `head -c 100000 /dev/zero | tr '\0' a; echo END`})
	if len(r.Stdout) != shell.OutputCap || !strings.HasSuffix(r.Stdout, "aEND\n") {
		t.Errorf("stdout kept %d bytes ending %q, want the last %d", len(r.Stdout), r.Stdout[len(r.Stdout)-5:], shell.OutputCap)
	}
	if !strings.Contains(r.Truncated, "stdout: first 34468 of 100004 bytes cut") || !strings.Contains(r.Truncated, "65536") {
		t.Errorf("truncated = %q", r.Truncated)
	}
}

func TestWriteFile(t *testing.T) {
	m := newMachine(t)
	var w shell.WriteFileResult
	if msg := m.call(harbor.WriteFileTool, shell.WriteFileArgs{Path: "sub/run.sh", Base64: base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\necho ran\n")), Mode: 0o755}, &w); msg != "" {
		t.Fatal(msg)
	}
	if w.Path != filepath.Join(m.work, "sub/run.sh") || w.Bytes != 19 {
		t.Errorf("write_file = %+v", w)
	}
	if r := m.exec(shell.ExecArgs{Command: "./sub/run.sh"}); r.Stdout != "ran\n" {
		t.Errorf("the written script ran as %+v", r)
	}
	if msg := m.call(harbor.WriteFileTool, shell.WriteFileArgs{Path: "x", Content: "a", Base64: "YQ=="}, nil); !strings.Contains(msg, "not both") {
		t.Errorf("content and base64 = %q", msg)
	}
}

// verify runs the verifier with tests/test.sh = script (given LOGS, where /logs is here).
func (m *machine) verify(script string, timeout float64) (envserver.EvaluationResult, string) {
	m.t.Helper()
	args := harbor.Args{Instruction: "x", VerifierTimeoutSec: timeout, VerifierEnv: map[string]string{"LOGS": m.logs},
		Tests: harbor.Wire([]harbor.File{{Path: "test.sh", Content: []byte(script), Mode: 0o755}, {Path: "data/expected.txt", Content: []byte("42\n")}})}
	var r envserver.EvaluationResult
	msg := m.call(envserver.EvaluateHub, map[string]any{"name": harbor.VerifyFunc, "arguments": args}, &r)
	return r, msg
}

func TestTheVerifierReadsTheRewardTheTestsWrite(t *testing.T) {
	m := newMachine(t)
	if _, err := os.Stat(m.tests); !os.IsNotExist(err) {
		t.Fatalf("tests exist before the verifier runs: %v", err)
	}
	var prep shell.PrepareResult
	if msg := m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": harbor.Args{Instruction: "x"}}, &prep); msg != "" || len(prep.Dirs) != 2 {
		t.Fatalf("prepare = %+v %s", prep, msg)
	}
	// The agent's work, and a reward it plants: the verifier empties /logs/verifier first.
	m.exec(shell.ExecArgs{Command: "echo 42 > answer.txt; echo 1 > " + m.logs + "/verifier/reward.txt"})
	r, msg := m.verify(`cd "$(dirname "$0")"; echo checking; if cmp -s data/expected.txt "$OLDPWD/answer.txt"; then echo 1 > $LOGS/verifier/reward.txt; else echo 0 > $LOGS/verifier/reward.txt; fi; exit 7`, 60)
	if msg != "" || r.Reward != 1 || !r.Done || r.Info["exit_code"] != float64(7) || !strings.Contains(r.Info["test_stdout"].(string), "checking") {
		t.Fatalf("verify = %+v %s, want reward 1 with test.sh's exit 7 kept", r, msg)
	}
	if b, _ := os.ReadFile(filepath.Join(m.logs, "verifier", "test-stdout.txt")); string(b) != "checking\n" {
		t.Errorf("test-stdout.txt = %q", b)
	}
	// A reward the agent planted, and tests that write none: a task fault, not a score.
	m.exec(shell.ExecArgs{Command: "echo 1 > " + m.logs + "/verifier/reward.txt"})
	if _, msg := m.verify(`echo nothing`, 60); !strings.Contains(msg, "task fault: the verifier wrote no reward") {
		t.Errorf("no reward written (one planted before) = %q", msg)
	}
	r, msg = m.verify(`echo '{"reward": 0.25, "tests_passed": 1, "tests_total": 4}' > $LOGS/verifier/reward.json`, 60)
	if msg != "" || r.Reward != 0.25 || r.Info["rewards"].(map[string]any)["tests_total"] != float64(4) {
		t.Errorf("reward.json = %+v %s", r, msg)
	}
	r, msg = m.verify(`echo '{"accuracy": 0.5}' > $LOGS/verifier/reward.json`, 60)
	if msg != "" || r.Reward != 0.5 {
		t.Errorf("reward.json with one number = %+v %s", r, msg)
	}
	for script, want := range map[string]string{
		`echo 1 > $LOGS/verifier/reward.txt; echo '{"reward": 1}' > $LOGS/verifier/reward.json`: "wrote both reward.txt and reward.json",
		`: > $LOGS/verifier/reward.txt`:                        "reward.txt is empty",
		`echo pass > $LOGS/verifier/reward.txt`:                `reward.txt holds "pass", not a number`,
		`echo '{"a": 1, "b": 0}' > $LOGS/verifier/reward.json`: "none named \"reward\"",
		`echo '{"reward": "1"}' > $LOGS/verifier/reward.json`:  "not a number",
		`echo '[1]' > $LOGS/verifier/reward.json`:              "not a JSON object",
		`echo slow; sleep 300`:                                 "ran past its 0.5s",
	} {
		timeout := 60.0
		if strings.Contains(script, "sleep") {
			timeout = 0.5
		}
		if _, msg := m.verify(script, timeout); !strings.Contains(msg, "task fault: ") || !strings.Contains(msg, want) {
			t.Errorf("test.sh %q: %q, want a task fault saying %q", script, msg, want)
		}
	}
}

func TestTheTaskFaultPrefixIsThePlatforms(t *testing.T) {
	if envserver.TaskFaultPrefix != agent.TaskFaultPrefix {
		t.Errorf("envserver says %q, the platform reads %q", envserver.TaskFaultPrefix, agent.TaskFaultPrefix)
	}
	if !agent.TaskFault(&agent.ToolResult{IsError: true, Text: (&envserver.TaskFault{Reason: "x"}).Error()}) {
		t.Error("a TaskFault's tool error is not read as one")
	}
}

func (m *machine) send(args shell.TerminalSendArgs) shell.TerminalScreen {
	m.t.Helper()
	var s shell.TerminalScreen
	if msg := m.call(harbor.TerminalSendTool, args, &s); msg != "" {
		m.t.Fatalf("terminal_send %+v: %s", args, msg)
	}
	return s
}

// waitScreen sends args, then reads the screen until it holds want (a busy machine may take a
// while to draw it).
func (m *machine) waitScreen(args shell.TerminalSendArgs, want string) shell.TerminalScreen {
	m.t.Helper()
	s := m.send(args)
	for i := 0; !strings.Contains(s.Screen, want); i++ {
		if i == 300 {
			m.t.Fatalf("the screen never showed %q:\n%s", want, s.Screen)
		}
		time.Sleep(50 * time.Millisecond)
		if msg := m.call(harbor.TerminalReadTool, shell.TerminalReadArgs{}, &s); msg != "" {
			m.t.Fatal(msg)
		}
	}
	return s
}

func TestTheTerminalKeepsItsShellBetweenCalls(t *testing.T) {
	m := newMachine(t)
	m.waitScreen(shell.TerminalSendArgs{Keys: "cd /tmp && x=42\n"}, "")
	s := m.waitScreen(shell.TerminalSendArgs{Keys: "echo \"x is $x in $(pwd)\"\n"}, "x is 42 in /tmp")
	if !s.Running {
		t.Errorf("the shell is not running: %+v", s)
	}
	// An interactive program reads what is typed; C-c interrupts one that runs on.
	m.waitScreen(shell.TerminalSendArgs{Keys: "cat\n"}, "cat")
	m.waitScreen(shell.TerminalSendArgs{Keys: "typed line", Press: []string{"Enter"}}, "typed line\ntyped line")
	m.waitScreen(shell.TerminalSendArgs{Press: []string{"C-d"}}, "")
	m.waitScreen(shell.TerminalSendArgs{Keys: "sleep 300\n"}, "sleep 300")
	m.waitScreen(shell.TerminalSendArgs{Press: []string{"C-c"}}, "^C")
	m.waitScreen(shell.TerminalSendArgs{Keys: "echo after-$((6*7))\n"}, "after-42")
	if msg := m.call(harbor.TerminalSendTool, shell.TerminalSendArgs{Press: []string{"Hyper"}}, nil); !strings.Contains(msg, "not a key name") {
		t.Errorf("an unknown key: %q", msg)
	}
	// The shell exits; the next send starts a new one (the old one's variables gone).
	s = m.send(shell.TerminalSendArgs{Keys: "exit\n", WaitSec: 5})
	for i := 0; s.Running; i++ {
		if i == 100 {
			t.Fatalf("the shell did not exit: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
		m.call(harbor.TerminalReadTool, shell.TerminalReadArgs{}, &s)
	}
	m.waitScreen(shell.TerminalSendArgs{Keys: "echo \"x=[$x]\"\n"}, "x=[]")
}

// The task's [environment].env is resolved against the sandbox's own variables (there, the
// member's secrets and the environment's variables; here, this process's) and reaches every
// command, the verifier's too; a variable the sandbox lacks fails the setup, naming it.
func TestTheTasksEnvironmentReachesEveryCommand(t *testing.T) {
	m := newMachine(t)
	args := harbor.Args{Instruction: "x", Env: map[string]string{"TOKEN": "${HARBOR_TEST_TOKEN}", "MODE": "${HARBOR_TEST_MODE:-offline}"}}
	if msg := m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": args}, nil); !strings.Contains(msg, "TOKEN (HARBOR_TEST_TOKEN not set)") {
		t.Errorf("setup without the variable: %q", msg)
	}
	t.Setenv("HARBOR_TEST_TOKEN", "tok-123")
	if msg := m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": args}, nil); msg != "" {
		t.Fatal(msg)
	}
	if r := m.exec(shell.ExecArgs{Command: `echo "$TOKEN $MODE"`}); r.Stdout != "tok-123 offline\n" {
		t.Errorf("exec saw %q", r.Stdout)
	}
	m.waitScreen(shell.TerminalSendArgs{Keys: "echo \"term:$TOKEN\"\n"}, "term:tok-123")
	args.Tests = harbor.Wire([]harbor.File{{Path: "test.sh", Content: []byte(`[ "$TOKEN" = tok-123 ] && echo 1 > ` + m.logs + `/verifier/reward.txt || echo 0 > ` + m.logs + "/verifier/reward.txt\n")}})
	args.VerifierTimeoutSec = 60
	var r envserver.EvaluationResult
	if msg := m.call(envserver.EvaluateHub, map[string]any{"name": harbor.VerifyFunc, "arguments": args}, &r); msg != "" || r.Reward != 1 {
		t.Errorf("the verifier with the task's environment: %+v %s", r, msg)
	}
}

// A healthcheck gates the setup: it passes once its command does (failures in the start period
// not counted), and fails the setup after retries consecutive failures, saying so.
func TestAHealthcheckGatesTheSetup(t *testing.T) {
	m := newMachine(t)
	ready := filepath.Join(m.work, "ready")
	m.exec(shell.ExecArgs{Command: "(sleep 0.5; touch " + ready + ") >/dev/null 2>&1 &"})
	f := func(v float64) *float64 { return &v }
	two := 2
	h := &harbor.Healthcheck{Command: "test -f " + ready, IntervalSec: f(0.05), StartIntervalSec: f(0.05), StartPeriodSec: f(30), Retries: &two}
	begin := time.Now()
	if msg := m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": harbor.Args{Instruction: "x", Healthcheck: h}}, nil); msg != "" {
		t.Fatalf("a healthcheck that passes in its start period: %s", msg)
	}
	if took := time.Since(begin); took < 400*time.Millisecond {
		t.Errorf("the setup returned after %s, before the check could pass", took)
	}
	h = &harbor.Healthcheck{Command: "echo not yet; exit 1", IntervalSec: f(0.05), Retries: &two}
	msg := m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": harbor.Args{Instruction: "x", Healthcheck: h}}, nil)
	if !strings.Contains(msg, "healthcheck failed 2 times in a row after 2 checks") || !strings.Contains(msg, "not yet") {
		t.Errorf("an unhealthy environment: %q", msg)
	}
}

// What the agent left running stops before the tests run: a loop that keeps planting a reward
// (detached with setsid, or in the terminal) neither scores nor makes the tests' reward a fault.
func TestTheVerifierStopsWhatTheAgentLeftRunning(t *testing.T) {
	m := newMachine(t)
	plant := `while true; do echo 1 > ` + m.logs + `/verifier/reward.txt; sleep 0.02; done`
	m.exec(shell.ExecArgs{Command: "mkdir -p " + m.logs + "/verifier; (" + plant + ") > /dev/null 2>&1 &"})
	m.exec(shell.ExecArgs{Command: "setsid sh -c '" + plant + "' > /dev/null 2>&1 < /dev/null &"})
	m.waitScreen(shell.TerminalSendArgs{Keys: plant + "\n"}, "while true")
	time.Sleep(100 * time.Millisecond)
	for i := range 3 {
		r, msg := m.verify(`sleep 0.3; echo 0 > $LOGS/verifier/reward.txt`, 60)
		if msg != "" || r.Reward != 0 {
			t.Fatalf("verify %d with planting loops left running: %+v %q, want reward 0", i, r, msg)
		}
	}
	// The loops are gone, and no zombie of theirs is left.
	for _, pid := range descendantsOf(t, os.Getpid()) {
		if st, _ := os.ReadFile("/proc/" + pid + "/cmdline"); strings.Contains(string(st), "while true") || strings.Contains(string(st), "sleep") {
			t.Errorf("process %s (%q) outlived the verification", pid, st)
		}
	}
}

// descendantsOf lists the pids below pid, zombies included.
func descendantsOf(t *testing.T, pid int) []string {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	parent := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		parent[e.Name()] = f[1]
	}
	var out []string
	for p := range parent {
		for q := p; q != "" && q != "0" && q != "1"; q = parent[q] {
			if q == fmt.Sprint(pid) && p != q {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// A job's timeout multiplier, given to the sandbox, scales the verifier's time.
func TestTheVerifiersTimeScalesByTheJobsMultiplier(t *testing.T) {
	m := newMachine(t)
	script := `sleep 0.6; echo 1 > $LOGS/verifier/reward.txt`
	if _, msg := m.verify(script, 0.3); !strings.Contains(msg, "ran past its 0.3s") {
		t.Errorf("without a multiplier: %q, want past its time", msg)
	}
	t.Setenv(harbor.TimeoutMultiplierEnv, "5")
	if r, msg := m.verify(script, 0.3); msg != "" || r.Reward != 1 {
		t.Errorf("with a multiplier of 5: %+v %q", r, msg)
	}
}

// A task's users: the agent's commands (exec, the terminal, write_file, the oracle's solution)
// run as [agent].user, which exec may not leave; test.sh runs as [verifier].user; a user the
// image does not have fails the setup.
func TestTheTasksUsersRunItsCommands(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	var solution string
	m := newMachineWith(t, func(dir string, c *shell.Config) {
		os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's folders are 0700
		os.Chmod(dir, 0o755)
		os.Chmod(c.WorkDir, 0o777)
		os.Mkdir(filepath.Join(dir, "rootonly"), 0o755)
		c.Passwd = filepath.Join(dir, "passwd")
		os.WriteFile(c.Passwd, []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1234:1234:agent:/home/agent:/bin/sh\n"), 0o644)
		solution = filepath.Join(dir, "solution")
		c.Solution = solution
	})
	dir := filepath.Dir(m.work)
	setup := func(a harbor.Args) string {
		a.Instruction = "x"
		return m.call(envserver.SetupHub, map[string]any{"name": harbor.SetupFunc, "arguments": a}, nil)
	}
	if msg := setup(harbor.Args{AgentUser: "ghost"}); !strings.Contains(msg, `[agent].user: user "ghost": not a user of this image`) {
		t.Errorf("setup with a user the image lacks: %q", msg)
	}
	if msg := setup(harbor.Args{AgentUser: "agent", VerifierUser: "0"}); msg != "" {
		t.Fatal(msg)
	}
	if r := m.exec(shell.ExecArgs{Command: `echo "$(id -u):$(id -g) $HOME $USER"`}); r.Stdout != "1234:1234 /home/agent agent\n" {
		t.Errorf("exec as the agent's user: %+v", r)
	}
	if r := m.exec(shell.ExecArgs{Command: "id -u", User: "1234"}); r.Stdout != "1234\n" {
		t.Errorf("exec naming the agent's uid: %+v", r)
	}
	if msg := m.call(harbor.ExecTool, shell.ExecArgs{Command: "id -u", User: "root"}, nil); !strings.Contains(msg, "as no other user") {
		t.Errorf("exec as root in a task whose agent is agent: %q", msg)
	}
	// write_file writes as the agent: its file, and none where only root may write.
	var w shell.WriteFileResult
	if msg := m.call(harbor.WriteFileTool, shell.WriteFileArgs{Path: "mine.txt", Content: "x"}, &w); msg != "" {
		t.Fatal(msg)
	}
	if fi, err := os.Stat(filepath.Join(m.work, "mine.txt")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1234 {
		t.Errorf("write_file's file: %v %+v", err, fi)
	}
	if msg := m.call(harbor.WriteFileTool, shell.WriteFileArgs{Path: filepath.Join(dir, "rootonly", "x"), Content: "x"}, nil); !strings.Contains(msg, "permission denied") {
		t.Errorf("write_file where only root may write: %q", msg)
	}
	// The oracle's solution/ is the agent's to write.
	if fi, err := os.Stat(solution); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 1234 {
		t.Errorf("the solution folder: %v %+v", err, fi)
	}
	if msg := m.call(harbor.WriteFileTool, shell.WriteFileArgs{Path: filepath.Join(solution, "solve.sh"), Content: "id -u"}, nil); msg != "" {
		t.Errorf("the oracle's write of solve.sh: %s", msg)
	}
	m.waitScreen(shell.TerminalSendArgs{Keys: "echo \"term-$(id -u)\"\n"}, "term-1234")
	// The verifier runs as its own user: root here, then the agent.
	for _, c := range []struct{ user, want string }{{"0", "0"}, {"agent", "1234"}} {
		if msg := setup(harbor.Args{AgentUser: "agent", VerifierUser: c.user}); msg != "" {
			t.Fatal(msg)
		}
		// The verifier's user is setup's: an agent that rewrites /etc/passwd changes nothing.
		os.WriteFile(filepath.Join(dir, "passwd"), []byte("agent:x:0:0::/:/bin/sh\n"), 0o644)
		args := harbor.Args{Instruction: "x", VerifierUser: c.user, VerifierTimeoutSec: 60,
			Tests: harbor.Wire([]harbor.File{{Path: "test.sh", Content: []byte("id -u > " + m.logs + "/verifier/reward.txt\n")}})}
		var r envserver.EvaluationResult
		if msg := m.call(envserver.EvaluateHub, map[string]any{"name": harbor.VerifyFunc, "arguments": args}, &r); msg != "" || fmt.Sprint(r.Reward) != c.want {
			t.Errorf("the verifier as %s: %+v %s, want its uid %s as the reward", c.user, r, msg, c.want)
		}
		os.WriteFile(filepath.Join(dir, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1234:1234:agent:/home/agent:/bin/sh\n"), 0o644)
	}
	// Another name of the agent's uid brings no other group.
	os.WriteFile(filepath.Join(dir, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nagent:x:1234:1234:agent:/home/agent:/bin/sh\nalias:x:1234:0::/:/bin/sh\n"), 0o644)
	if r := m.exec(shell.ExecArgs{Command: "id -g", User: "alias"}); r.Stdout != "1234\n" {
		t.Errorf("exec as another name of the agent's uid: %+v, want the agent's group", r)
	}
	// A /solution that is a link is not followed.
	os.RemoveAll(solution)
	os.Symlink(filepath.Join(dir, "rootonly"), solution)
	if msg := setup(harbor.Args{AgentUser: "agent"}); !strings.Contains(msg, "not a directory of its own") {
		t.Errorf("setup with /solution a link: %q", msg)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "rootonly")); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Error("the link's target was handed to the agent's user")
	}
}
