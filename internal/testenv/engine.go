package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/forkthread"
)

// enginesConf is the containers.conf the test engine runs with: no default ulimits (the default
// nofile limit exceeds what many hosts allow), runc as the runtime (crun fails on hybrid cgroup
// hosts), and an exec's monitor gone 5 s after the exec (podman keeps it 300 s by default: an
// agent run inside a container is an exec, and the tests' would outlive them by minutes).
const enginesConf = "[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = \"runc\"\nexit_command_delay = 5\n"

var engine struct {
	dir  string
	host string
	cmd  *exec.Cmd
	err  error
}

// ContainerEngine is the address ("unix://…") of a real Docker Engine API server for this test
// binary: `podman system service` with its own storage (vfs driver) and configuration under a
// temporary directory, started the first time a test asks and stopped by Cleanup. Podman comes
// from Debian's podman package, which .ci/run installs.
func ContainerEngine(t testing.TB) string {
	t.Helper()
	programs.mu.Lock()
	defer programs.mu.Unlock()
	if engine.host == "" && engine.err == nil {
		engine.host, engine.err = startEngine()
	}
	if errors.Is(engine.err, errNoPodman) {
		MissingTool(t, "podman")
	}
	if engine.err != nil {
		t.Fatalf("container engine: %v", engine.err)
	}
	return engine.host
}

var errNoPodman = errors.New("no podman: install Debian's podman package (.ci/run does)")

// Unavailable skips a test whose tool is missing, or fails it under CI=true, where every tool
// must be present.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// MissingTool skips t when a tool the test needs is not installed, except under CI=true, where
// it fails: .ci/run installs every tool the tests use.
func MissingTool(t testing.TB, tool string) {
	t.Helper()
	Unavailable(t, "%s is not installed (.ci/run installs it)", tool)
}

func startEngine() (string, error) {
	bin, err := exec.LookPath("podman")
	if err != nil {
		return "", errNoPodman
	}
	dir, err := os.MkdirTemp("", "proctor-test-engine-")
	if err != nil {
		return "", err
	}
	engine.dir = dir
	conf := filepath.Join(dir, "containers.conf")
	if err := os.WriteFile(conf, []byte(enginesConf), 0o600); err != nil {
		return "", err
	}
	sock := filepath.Join(dir, "engine.sock")
	cmd := exec.Command(bin, "--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "system", "service", "--time=0", "unix://"+sock)
	log, err := os.Create(filepath.Join(dir, "engine.log"))
	if err != nil {
		return "", err
	}
	defer log.Close()
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := forkthread.Start(cmd); err != nil { // see forkthread: Pdeathsig is a thread's
		return "", fmt.Errorf("start podman system service: %w", err)
	}
	engine.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return "unix://" + sock, nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			return "", fmt.Errorf("podman system service did not listen on %s within 30s: %s", sock, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopEngine stops the test engine and removes its storage.
func stopEngine() {
	if engine.cmd != nil {
		syscall.Kill(-engine.cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck // it may be gone
		done := make(chan struct{})
		go func() { engine.cmd.Wait(); close(done) }() //nolint:errcheck // killed on purpose
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-engine.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // last resort
			<-done
		}
	}
	if engine.dir != "" {
		// vfs storage holds read-only layers; make them removable first.
		filepath.WalkDir(engine.dir, func(p string, d os.DirEntry, err error) error { //nolint:errcheck // best effort
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o700) //nolint:errcheck // best effort
			}
			return nil
		})
		os.RemoveAll(engine.dir) //nolint:errcheck // a temp dir
	}
	engine.dir, engine.host, engine.cmd, engine.err = "", "", nil, nil
}
