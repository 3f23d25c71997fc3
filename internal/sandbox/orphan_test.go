package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSandboxDiesWithItsWorker(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			if iso == IsolationBubblewrap {
				newProvider(t, iso) // skips where bubblewrap does not work
			}
			root := t.TempDir()
			worker := exec.Command(testBinary(t))
			worker.Env = append(os.Environ(), helperEnv+"=worker", "ROOT="+root, "ISOLATION="+iso)
			worker.Stderr = t.Output()
			out, err := worker.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })

			lines, err := readStdoutLines(out, 1, 20*time.Second)
			if err != nil {
				t.Fatalf("worker printed no pids: %v", err)
			}
			var pids []int
			if err := json.Unmarshal([]byte(lines[0]), &pids); err != nil {
				t.Fatalf("worker printed %q: %v", lines[0], err)
			}
			t.Cleanup(func() { killAll(pids) })
			var comms []string
			for _, pid := range pids {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				comms = append(comms, strings.TrimSpace(string(comm)))
			}
			if n := strings.Count(strings.Join(comms, " "), "sleep"); n != 2 {
				t.Fatalf("sandbox processes %v are %q: want the sleep and its forked sibling", pids, comms)
			}

			if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			worker.Wait()
			if left := waitGone(pids, 5*time.Second); len(left) > 0 {
				t.Errorf("5s after kill -9 of the worker, sandbox processes %v of %v (%q) still run", left, pids, comms)
			}
		})
	}
}
