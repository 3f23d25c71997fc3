// Package shell is Proctor's shell server: the MCP server Proctor supplies to images that have
// none of their own (Harbor tasks). It is built into a static program (cmd/proctor-shell) that
// a build adds to such an image as its command, so that the image is an environment like any
// other: its tools are what an agent drives, its scenario is what a task runs.
//
// Visible tools: exec (a command through the image's bash or sh, its output capped),
// write_file, and a persistent terminal (terminal_send, terminal_read: an interactive shell on a
// pseudo-terminal, and the screen it draws). Hidden: the setup hub's prepare (Harbor's /logs layout) and the evaluate hub's
// verify, Harbor's verifier: /logs/verifier emptied, tests/ put at /tests, `bash
// /tests/test.sh` run, the reward read from /logs/verifier/reward.json or reward.txt.
package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/procfs"
)

// OutputCap is the most of a stream (stdout, stderr) a call's result carries: its last bytes.
const OutputCap = 64 << 10

// VerifierOutputKeep is the most of test.sh's streams /logs/verifier keeps: their last bytes.
const VerifierOutputKeep = 4 << 20

// MaxExecTimeoutSec bounds one exec call; DefaultExecTimeoutSec is its time when it names none.
const (
	MaxExecTimeoutSec     = 24 * 3600
	DefaultExecTimeoutSec = 600
)

// Config is how the server runs commands.
type Config struct {
	// WorkDir is where commands run unless they say otherwise: the image's WORKDIR ("/" when it
	// has none).
	WorkDir string
	// Tests and Logs are where the verifier puts tests/ and reads /logs/verifier from, and
	// Solution where the oracle writes solution/: Harbor's /tests, /logs and /solution by default
	// (tests of this package move them).
	Tests, Logs, Solution string
	// Passwd is the image's user database, where users are looked up: /etc/passwd by default.
	Passwd string
}

// New builds the shell server.
func New(logger *slog.Logger, cfg Config) (*envserver.Server, error) {
	if cfg.WorkDir == "" {
		cfg.WorkDir = "/"
	}
	if cfg.Tests == "" {
		cfg.Tests = harbor.TestsDir
	}
	if cfg.Logs == "" {
		cfg.Logs = harbor.LogsDir
	}
	if cfg.Solution == "" {
		cfg.Solution = harbor.SolutionDir
	}
	if cfg.Passwd == "" {
		cfg.Passwd = "/etc/passwd"
	}
	s := &server{cfg: cfg, log: logger}
	// What the agent's commands leave behind, however they detach, stays below this process
	// (orphans are adopted here, not by the sandbox's init), so that the verifier can stop it all.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		logger.Warn("shell server: not the subreaper of what the agent starts", "error", err)
	}
	children.reaper.Do(func() { go reapOrphansForever() })
	srv := envserver.New("proctor-shell",
		envserver.WithVersion("1.0.0"),
		envserver.WithInstructions("A Linux machine. Run shell commands with exec (bash, or sh where the image has no bash) and write files with write_file. "+
			"Commands run in "+cfg.WorkDir+" unless you give cwd; each call is a fresh shell."),
		envserver.WithLogger(logger))
	setup, evaluate := envserver.NewHub(envserver.SetupHub), envserver.NewHub(envserver.EvaluateHub)
	err := errors.Join(
		added(envserver.AddTool(srv, harbor.ExecTool, "Run a shell command and return its exit code, stdout and stderr (each capped to its last 64 KiB). "+
			"The command runs with bash -c (sh -c without bash), in cwd (default the task's working directory), with env added to the environment, "+
			"and is killed with everything it started after timeout_sec (default 600). What it starts in the background (cmd > log 2>&1 &) keeps running after the call.", s.exec)),
		added(envserver.AddTool(srv, harbor.WriteFileTool, "Write a file (its folders made as needed): content as text, or base64 for bytes.", s.writeFile)),
		added(envserver.AddTool(srv, harbor.TerminalSendTool, fmt.Sprintf("Type into a persistent interactive shell on a %dx%d terminal (its state, directory and programs stay between calls), "+
			"press keys by name (Enter, C-c, …), wait for the output to settle (wait_sec, default 1), and see the screen. For interactive programs; exec suits one-off commands.", TerminalCols, TerminalRows), s.terminalSend)),
		added(envserver.AddTool(srv, harbor.TerminalReadTool, "See the persistent terminal's screen now (and, with scrollback, what scrolled off it).", s.terminalRead)),
		added(envserver.AddTool(setup, harbor.SetupFunc, "Prepare Harbor's layout (/logs/agent and /logs/verifier, empty) and the task's environment variables.", s.prepare)),
		added(envserver.AddTool(evaluate, harbor.VerifyFunc, "Run the task's verifier: tests at /tests, bash /tests/test.sh, the reward from /logs/verifier.", s.verify)),
		srv.Mount(setup),
		srv.Mount(evaluate),
		envserver.AddScenario(srv, envserver.Scenario[harbor.Args]{
			Name:        harbor.Scenario,
			Title:       "Harbor task",
			Description: "A task in Harbor's format: the instruction is the prompt; its tests grade the machine's state afterwards.",
			Prompt:      "{{.Instruction}}",
			Setup:       envserver.Call{Tool: envserver.SetupHub, Name: harbor.SetupFunc},
			Evaluate:    envserver.Call{Tool: envserver.EvaluateHub, Name: harbor.VerifyFunc},
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("build the shell server: %w", err)
	}
	return srv, nil
}

func added[F any](_ F, err error) error { return err }

type server struct {
	cfg Config
	log *slog.Logger

	termMu sync.Mutex
	term   *terminal // the terminal tools' shell, once started

	envMu   sync.Mutex
	taskEnv map[string]string // the task's [environment].env, resolved by setup (or the verifier)
	// agentUser is [agent].user, resolved by setup: what the agent's tools run as (nil: this
	// program's user, the image's).
	agentUser *account
	// verifierUser is [verifier].user as setup resolved it, before the agent could change the
	// image's user database.
	verifierUser *account
}

// children are the processes this program started and waits for itself (the shells of calls
// and the terminal's): the orphan reaper leaves them alone. One registry per process, as the
// subreaper role is.
var children = struct {
	sync.Mutex
	waiting map[int]bool
	reaper  sync.Once
}{waiting: map[int]bool{}}

// startChild starts cmd and registers it as waited for, before any reaper can look.
func startChild(cmd *exec.Cmd) error {
	children.Lock()
	defer children.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	children.waiting[cmd.Process.Pid] = true
	return nil
}

// waitChild waits for cmd (started with startChild) and unregisters it.
func waitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.Lock()
	delete(children.waiting, cmd.Process.Pid)
	children.Unlock()
	return err
}

// reapOrphansForever reaps, at each SIGCHLD (and every few seconds), the orphans this program
// adopted as their subreaper: what the agent's commands left behind, once it exits.
func reapOrphansForever() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	tick := time.NewTicker(5 * time.Second)
	for {
		select {
		case <-ch:
		case <-tick.C:
		}
		reapOrphans()
	}
}

// setTaskEnv resolves the task's [environment].env against this process's environment (the
// sandbox's: the launching member's secrets and the environment's variables, never the
// worker's) and keeps it for every command from now on.
func (s *server) setTaskEnv(templates map[string]string) error {
	env := map[string]string{}
	var missing []string
	for _, k := range slices.Sorted(maps.Keys(templates)) {
		v, err := harbor.ExpandEnv(templates[k], os.LookupEnv)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", k, err))
			continue
		}
		env[k] = v
	}
	if len(missing) > 0 {
		return fmt.Errorf("the task's environment.env cannot be set: %s: give the launching member a secret of that name, or the environment a variable", strings.Join(missing, "; "))
	}
	s.envMu.Lock()
	s.taskEnv = env
	s.envMu.Unlock()
	return nil
}

// environ is the environment commands run with: this process's, the task's, then extra.
func (s *server) environ(extra map[string]string) []string {
	env := os.Environ()
	s.envMu.Lock()
	for _, k := range slices.Sorted(maps.Keys(s.taskEnv)) {
		env = append(env, k+"="+s.taskEnv[k])
	}
	s.envMu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// ExecArgs are exec's arguments.
type ExecArgs struct {
	Command    string            `json:"command" jsonschema:"the shell command"`
	Cwd        string            `json:"cwd,omitempty" jsonschema:"working directory (default the task's)"`
	TimeoutSec float64           `json:"timeout_sec,omitempty" jsonschema:"seconds before the command is killed (default 600, at most 86400)"`
	Env        map[string]string `json:"env,omitempty" jsonschema:"environment variables added for this command"`
	User       string            `json:"user,omitempty" jsonschema:"the user to run as: a name of the machine's /etc/passwd or a uid (default the task's agent user, else the machine's own); a task that names its agent's user runs every command as that user"`
}

// ExecResult is exec's answer.
type ExecResult struct {
	ExitCode int    `json:"exit_code" jsonschema:"the command's exit status (-1 when it was killed)"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out,omitempty" jsonschema:"the command ran past timeout_sec and was killed"`
	// Truncated says how much of each stream was cut, and the cap.
	Truncated  string  `json:"truncated,omitempty" jsonschema:"what was cut from the output: each stream keeps its last 65536 bytes"`
	DurationMs float64 `json:"duration_ms"`
}

func (s *server) exec(ctx context.Context, in ExecArgs) (ExecResult, error) {
	if strings.TrimSpace(in.Command) == "" {
		return ExecResult{}, errors.New("command is empty")
	}
	timeout := in.TimeoutSec
	switch {
	case timeout == 0:
		timeout = DefaultExecTimeoutSec
	case timeout < 0 || timeout > MaxExecTimeoutSec || math.IsNaN(timeout):
		return ExecResult{}, fmt.Errorf("timeout_sec %v: between 0 and %d", in.TimeoutSec, MaxExecTimeoutSec)
	}
	cwd := s.cfg.WorkDir
	if in.Cwd != "" {
		cwd = in.Cwd
	}
	as, err := s.execUser(in.User)
	if err != nil {
		return ExecResult{}, err
	}
	r := s.run(ctx, in.Command, cwd, in.Env, time.Duration(timeout*float64(time.Second)), OutputCap, as)
	if r.err != nil {
		return ExecResult{}, r.err
	}
	out := ExecResult{ExitCode: r.exit, TimedOut: r.timedOut, DurationMs: float64(r.took.Microseconds()) / 1000}
	var cut []string
	out.Stdout, cut = tail(r.stdout.Bytes(), r.outLen, "stdout", cut)
	out.Stderr, cut = tail(r.stderr.Bytes(), r.errLen, "stderr", cut)
	if len(cut) > 0 {
		out.Truncated = strings.Join(cut, "; ") + fmt.Sprintf(" (each stream keeps its last %d bytes)", OutputCap)
	}
	return out, nil
}

// execUser is who an exec call runs as: user, or the task's agent user (which a task that
// names one allows no other to be).
func (s *server) execUser(user string) (*account, error) {
	s.envMu.Lock()
	agent := s.agentUser
	s.envMu.Unlock()
	if user == "" {
		return agent, nil
	}
	a, err := lookupAccount(s.cfg.Passwd, user)
	if err != nil {
		return nil, err
	}
	if agent != nil {
		if a.uid != agent.uid {
			return nil, fmt.Errorf("user %q: this task runs its agent's commands as %s ([agent].user), and as no other user", user, agent)
		}
		return agent, nil // its group too: another name of the uid may not bring another
	}
	return a, nil
}

// tail is the last OutputCap bytes of a stream of total bytes whose last bytes are b, and cut
// with a line saying what was cut, if anything.
func tail(b []byte, total int64, name string, cut []string) (string, []string) {
	kept := tailText(b, OutputCap)
	if total <= int64(len(kept)) {
		return kept, cut
	}
	return kept, append(cut, fmt.Sprintf("%s: first %d of %d bytes cut", name, total-int64(len(kept)), total))
}

type ran struct {
	exit     int
	timedOut bool
	took     time.Duration
	// stdout and stderr are the streams' last bytes (up to the run's keep), of outLen and
	// errLen in all.
	stdout, stderr bytes.Buffer
	outLen, errLen int64
	err            error // the command could not be started
}

// tailWriter keeps the last max bytes written to it, and counts them all.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	buf   []byte
	total int64
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// snapshot copies what t keeps into b and answers how much was written in all.
func (t *tailWriter) snapshot(b *bytes.Buffer) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	kept := t.buf
	if len(kept) > t.max {
		kept = kept[len(kept)-t.max:]
	}
	b.Write(kept)
	return t.total
}

// drain copies r into w until r ends, then says so on done.
func drain(r *os.File, w io.Writer, done chan<- struct{}) {
	io.Copy(w, r)
	r.Close()
	close(done)
}

// errNoShell is the answer of a tool that needs the image's shell, in an image without one.
var errNoShell = errors.New("the image has no shell (/bin/bash or /bin/sh) to run commands with")

// shell is the image's bash, else its sh.
func (s *server) shell() string {
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"} {
		if fi, err := os.Stat(sh); err == nil && fi.Mode().IsRegular() {
			return sh
		}
	}
	return ""
}

// backgroundOutputWait is how long a call waits, once its shell has exited, for the output of
// what it left running in the background.
const backgroundOutputWait = 500 * time.Millisecond

// run runs command with the shell in cwd, in a process group of its own that is killed whole
// when the time is up or ctx ends; what it leaves running in the background otherwise lives on.
// It keeps the last keep bytes of each stream. What a background process writes to them after
// the call is read and dropped: it never dies of a closed pipe.
func (s *server) run(ctx context.Context, command, cwd string, env map[string]string, timeout time.Duration, keep int, as *account) *ran {
	r := &ran{}
	sh := s.shell()
	if sh == "" {
		r.err = errNoShell
		return r
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() {
		r.err = fmt.Errorf("cwd %s: not a directory here", cwd)
		return r
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		r.err = err
		return r
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		r.err = err
		return r
	}
	cmd := exec.Command(sh, "-c", command)
	cmd.Dir, cmd.Stdout, cmd.Stderr = cwd, outW, errW
	cmd.Env = s.environ(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	as.as(cmd)
	start := time.Now()
	err = startChild(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		r.err = fmt.Errorf("start %s: %w", sh, err)
		if as != nil {
			r.err = fmt.Errorf("start %s as %s: %w", sh, as, err)
		}
		return r
	}
	out, errs := &tailWriter{max: keep}, &tailWriter{max: keep}
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go drain(outR, out, outDone)
	go drain(errR, errs, errDone)
	defer func() {
		// What the shell left running may hold its output open: the call waits for it this
		// long, then answers what it has (the rest is read and dropped).
		wait, stop := context.WithTimeout(context.Background(), backgroundOutputWait)
		defer stop()
		for _, d := range []chan struct{}{outDone, errDone} {
			select {
			case <-d:
			case <-wait.Done():
			}
		}
		r.outLen, r.errLen = out.snapshot(&r.stdout), errs.snapshot(&r.stderr)
	}()
	done := make(chan error, 1)
	go func() { done <- waitChild(cmd) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		r.timedOut = true
	case <-ctx.Done():
	}
	if r.timedOut || ctx.Err() != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	r.took = time.Since(start)
	r.exit = cmd.ProcessState.ExitCode()
	if err != nil && ctx.Err() != nil && !r.timedOut {
		r.err = ctx.Err()
	}
	return r
}

// WriteFileArgs are write_file's arguments.
type WriteFileArgs struct {
	Path    string `json:"path" jsonschema:"absolute path, or relative to the task's working directory"`
	Content string `json:"content,omitempty" jsonschema:"the file's text"`
	Base64  string `json:"base64,omitempty" jsonschema:"the file's bytes, standard base64 (instead of content)"`
	Mode    int    `json:"mode,omitempty" jsonschema:"permission bits, e.g. 493 for 0755 (default 420, 0644)"`
}

// WriteFileResult is write_file's answer.
type WriteFileResult struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

func (s *server) writeFile(_ context.Context, in WriteFileArgs) (WriteFileResult, error) {
	if in.Path == "" {
		return WriteFileResult{}, errors.New("path is empty")
	}
	if in.Content != "" && in.Base64 != "" {
		return WriteFileResult{}, errors.New("give content or base64, not both")
	}
	data := []byte(in.Content)
	if in.Base64 != "" {
		f, err := harbor.WireFile{Path: "f", Base64: in.Base64}.Decode()
		if err != nil {
			return WriteFileResult{}, errors.New("base64: not standard base64")
		}
		data = f.Content
	}
	p := in.Path
	if !path.IsAbs(p) {
		p = path.Join(s.cfg.WorkDir, p)
	}
	mode := os.FileMode(in.Mode) & 0o777
	if mode == 0 {
		mode = 0o644
	}
	s.envMu.Lock()
	as := s.agentUser
	s.envMu.Unlock()
	if err := asAccount(as, func() error { return writeFile(p, data, mode) }); err != nil {
		return WriteFileResult{}, err
	}
	return WriteFileResult{Path: p, Bytes: len(data)}, nil
}

func writeFile(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode) // WriteFile keeps an existing file's mode, and the umask cuts a new one's
}

// timeoutMultiplier is the job's timeout multiplier, as the platform gives it to the sandbox
// (harbor.TimeoutMultiplierEnv); 1 without one.
func timeoutMultiplier() float64 {
	if m, err := strconv.ParseFloat(os.Getenv(harbor.TimeoutMultiplierEnv), 64); err == nil && m > 0 && !math.IsInf(m, 0) {
		return m
	}
	return 1
}

// healthcheck runs h as Docker's HEALTHCHECK does until it passes: every start_interval_sec
// during start_period_sec (failures not counted), then every interval_sec until retries
// consecutive failures make it unhealthy, each check bounded by timeout_sec.
func (s *server) healthcheck(ctx context.Context, h *harbor.Healthcheck) error {
	or := func(v *float64, d float64) time.Duration {
		if v != nil && *v > 0 { // 0 is the default, as in Docker
			d = *v
		}
		return time.Duration(d * float64(time.Second))
	}
	retries := 3
	if h.Retries != nil {
		retries = *h.Retries
	}
	m := timeoutMultiplier()
	checkTimeout := time.Duration(float64(or(h.TimeoutSec, 30)) * m)
	start := time.Now()
	startPeriod := time.Duration(float64(or(h.StartPeriodSec, 0)) * m)
	failures := 0
	for checks := 1; ; checks++ {
		r := s.run(ctx, h.Command, s.cfg.WorkDir, nil, checkTimeout, OutputCap, nil)
		if r.err != nil {
			return r.err
		}
		if r.exit == 0 && !r.timedOut {
			return nil
		}
		inStart := time.Since(start) < startPeriod
		if !inStart {
			failures++
		}
		if failures >= retries {
			why := fmt.Sprintf("exit %d", r.exit)
			if r.timedOut {
				why = "past its timeout"
			}
			return fmt.Errorf("the environment's healthcheck failed %d times in a row after %d checks in %s (last: %s; its output ends: %s)",
				failures, checks, time.Since(start).Round(time.Millisecond), why, tailText(append(r.stdout.Bytes(), r.stderr.Bytes()...), 300))
		}
		wait := or(h.IntervalSec, 5)
		if inStart {
			wait = or(h.StartIntervalSec, 5)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// PrepareResult is prepare's answer.
type PrepareResult struct {
	Dirs []string `json:"dirs"`
}

func (s *server) prepare(ctx context.Context, a harbor.Args) (PrepareResult, error) {
	if err := s.setTaskEnv(a.Env); err != nil {
		return PrepareResult{}, err
	}
	agent, err := s.switchableUser(ctx, "[agent].user", a.AgentUser)
	if err != nil {
		return PrepareResult{}, err
	}
	verifier, err := s.switchableUser(ctx, "[verifier].user", a.VerifierUser)
	if err != nil {
		return PrepareResult{}, err
	}
	if agent != nil {
		// The agent's user writes the oracle's solution/ there, where only root could make it.
		if err := ownedBy(s.cfg.Solution, agent); err != nil {
			return PrepareResult{}, err
		}
	}
	s.envMu.Lock()
	s.agentUser, s.verifierUser = agent, verifier
	s.envMu.Unlock()
	if h := a.Healthcheck; h != nil {
		if err := s.healthcheck(ctx, h); err != nil {
			return PrepareResult{}, err
		}
	}
	dirs := []string{filepath.Join(s.cfg.Logs, "agent"), filepath.Join(s.cfg.Logs, "verifier")}
	for _, d := range dirs {
		if err := emptyDir(d); err != nil {
			return PrepareResult{}, err
		}
	}
	return PrepareResult{Dirs: dirs}, nil
}

// switchableUser resolves a task's user (field names it for messages), nil for none, and
// checks that commands can run as it here: a sandbox without the privilege to switch users (the
// process provider's, whose only user is root) fails the start, saying so.
func (s *server) switchableUser(ctx context.Context, field, user string) (*account, error) {
	if user == "" {
		return nil, nil
	}
	a, err := lookupAccount(s.cfg.Passwd, user)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	r := s.run(ctx, "true", "/", nil, 30*time.Second, 1024, a)
	if r.err == nil && r.exit != 0 {
		r.err = fmt.Errorf("exit %d", r.exit)
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: the task runs commands as %s, which this sandbox cannot switch to (%v): "+
			"a sandbox of the process provider has no user but root, and the kubernetes provider's pods no capability to switch; run the task on the container provider", field, a, r.err)
	}
	return a, nil
}

// emptyDir makes d an empty directory anyone may write in, whatever was there.
func emptyDir(d string) error {
	if err := os.RemoveAll(d); err != nil {
		return err
	}
	if err := os.MkdirAll(d, 0o777); err != nil {
		return err
	}
	return os.Chmod(d, 0o777) // past the umask
}

// verify is Harbor's verifier: /logs/verifier emptied (a reward file the agent planted counts
// for nothing), tests/ at /tests (replacing whatever is there), `bash /tests/test.sh` (sh without bash) run with
// the verifier's env and time in the working directory, its output kept in
// /logs/verifier/test-stdout.txt and test-stderr.txt (and their tails in the result's info), and
// the reward read: reward.json (an object of numbers: "reward", else its only number, is the
// score; all are kept) or reward.txt (one number). Both files, neither, an empty or non-numeric
// one, or a verifier past its time is an envserver.TaskFault: the attempt ends in error, never a silent 0. test.sh's exit status is kept, not scored.
func (s *server) verify(ctx context.Context, a harbor.Args) (envserver.EvaluationResult, error) {
	if err := s.setTaskEnv(a.Env); err != nil {
		return envserver.EvaluationResult{}, err
	}
	// The agent is done: what it left running (a server, a loop that writes reward files) stops
	// before the tests run, so that it can neither touch their reward nor hold them up.
	s.stopAgentProcesses()
	vdir := filepath.Join(s.cfg.Logs, "verifier")
	if err := emptyDir(vdir); err != nil {
		return envserver.EvaluationResult{}, err
	}
	if err := os.RemoveAll(s.cfg.Tests); err != nil {
		return envserver.EvaluationResult{}, err
	}
	for _, w := range a.Tests {
		f, err := w.Decode()
		if err != nil {
			return envserver.EvaluationResult{}, &envserver.TaskFault{Reason: "tests: " + err.Error()}
		}
		if err := writeFile(filepath.Join(s.cfg.Tests, filepath.FromSlash(f.Path)), f.Content, os.FileMode(f.Mode)); err != nil {
			return envserver.EvaluationResult{}, err
		}
	}
	timeout := a.VerifierTimeoutSec
	if timeout <= 0 {
		timeout = harbor.DefaultVerifierTimeoutSec
	}
	timeout *= timeoutMultiplier()
	// Harbor's `bash /tests/test.sh`; an image without bash (busybox, Alpine) runs it with sh.
	interpreter := "bash"
	if sh := s.shell(); sh != "" && filepath.Base(sh) != "bash" {
		interpreter = "sh"
	}
	// The verifier's user as setup resolved it (an agent that rewrote /etc/passwd changes
	// nothing); looked up now only where no setup ran.
	s.envMu.Lock()
	verifier := s.verifierUser
	s.envMu.Unlock()
	if verifier == nil && a.VerifierUser != "" {
		var err error
		if verifier, err = lookupAccount(s.cfg.Passwd, a.VerifierUser); err != nil {
			return envserver.EvaluationResult{}, &envserver.TaskFault{Reason: "[verifier].user: " + err.Error()}
		}
	}
	r := s.run(ctx, interpreter+" "+filepath.Join(s.cfg.Tests, "test.sh"), s.cfg.WorkDir, a.VerifierEnv, time.Duration(timeout*float64(time.Second)), VerifierOutputKeep, verifier)
	if r.err != nil {
		return envserver.EvaluationResult{}, r.err
	}
	os.WriteFile(filepath.Join(vdir, "test-stdout.txt"), r.stdout.Bytes(), 0o644)
	os.WriteFile(filepath.Join(vdir, "test-stderr.txt"), r.stderr.Bytes(), 0o644)
	info := map[string]any{
		"exit_code":   r.exit,
		"duration_s":  math.Round(r.took.Seconds()*1000) / 1000,
		"test_stdout": tailText(r.stdout.Bytes(), 4096),
		"test_stderr": tailText(r.stderr.Bytes(), 4096),
	}
	if r.timedOut {
		return envserver.EvaluationResult{}, &envserver.TaskFault{Reason: fmt.Sprintf("the verifier ran past its %gs (verifier.timeout_sec, times the job's timeout multiplier); its output ends: %s", timeout, tailText(r.stdout.Bytes(), 500))}
	}
	rewards, score, err := readReward(vdir)
	if err != nil {
		return envserver.EvaluationResult{}, &envserver.TaskFault{Reason: fmt.Sprintf("%v (test.sh exited %d; its output ends: %s)", err, r.exit, tailText(r.stdout.Bytes(), 500))}
	}
	info["rewards"] = rewards
	return envserver.EvaluationResult{Reward: score, Done: true, Info: info,
		Content: fmt.Sprintf("verifier: reward %g (test.sh exited %d in %s)", score, r.exit, r.took.Round(time.Millisecond))}, nil
}

func tailText(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// readReward reads the reward files in dir.
func readReward(dir string) (map[string]float64, float64, error) {
	txt, errTxt := os.ReadFile(filepath.Join(dir, "reward.txt"))
	js, errJSON := os.ReadFile(filepath.Join(dir, "reward.json"))
	switch {
	case errTxt == nil && errJSON == nil:
		return nil, 0, errors.New("the verifier wrote both reward.txt and reward.json: one of them must be the reward")
	case errTxt != nil && errJSON != nil:
		return nil, 0, errors.New("the verifier wrote no reward: neither /logs/verifier/reward.txt nor reward.json")
	case errTxt == nil:
		s := strings.TrimSpace(string(txt))
		if s == "" {
			return nil, 0, errors.New("reward.txt is empty")
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, 0, fmt.Errorf("reward.txt holds %q, not a number", truncate(s, 100))
		}
		return map[string]float64{"reward": v}, v, nil
	}
	if len(bytes.TrimSpace(js)) == 0 {
		return nil, 0, errors.New("reward.json is empty")
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil {
		return nil, 0, fmt.Errorf("reward.json is not a JSON object: %v", err)
	}
	rewards := map[string]float64{}
	for k, v := range raw {
		f, ok := v.(float64)
		if !ok {
			return nil, 0, fmt.Errorf("reward.json: %q is %v, not a number", k, v)
		}
		rewards[k] = f
	}
	if v, ok := rewards["reward"]; ok {
		return rewards, v, nil
	}
	if len(rewards) == 1 {
		for _, v := range rewards {
			return rewards, v, nil
		}
	}
	return nil, 0, fmt.Errorf("reward.json has %d numbers and none named \"reward\": which is the score?", len(rewards))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// stopAgentProcesses ends every process this server started for the agent and everything they
// started, however detached (the terminal's shell, what exec calls left in the background): this
// process is their subreaper (see New), so they all descend from it. The shells of calls still
// running are killed with their groups too, and their callers reap them; the rest is reaped here.
func (s *server) stopAgentProcesses() {
	s.termMu.Lock()
	if t := s.term; t != nil {
		syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.exited
		t.ptm.Close()
		s.term = nil
	}
	s.termMu.Unlock()
	self := os.Getpid()
	for round := 0; round < 10; round++ {
		killed := 0
		for _, pid := range procfs.Descendants(self) {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
		reapOrphans()
		if killed == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapOrphans collects the exit statuses of this process's children that no one here waits for
// (orphans it adopted as their subreaper), so that they hold no process slot.
func reapOrphans() {
	self := os.Getpid()
	children.Lock()
	defer children.Unlock()
	for _, pid := range procfs.Pids(func(pid int) bool {
		ppid, state := procfs.Parent(pid)
		return ppid == self && state == "Z" && !children.waiting[pid]
	}) {
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}
