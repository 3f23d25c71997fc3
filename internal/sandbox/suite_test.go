package sandbox_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// TestProcessProviderSuite runs the provider suite against the process provider under
// bubblewrap, with the suite's image root file system as each sandbox's root.
func TestProcessProviderSuite(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T, max int) sandbox.Provider {
			p, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), MaxSandboxes: max,
				Isolation: sandbox.IsolationBubblewrap, StopGrace: time.Second})
			if err != nil {
				t.Logf("bubblewrap: %v", err)
				testenv.MissingTool(t, "a usable bubblewrap")
			}
			return p
		},
		Spec: func(t *testing.T, root string, argv ...string) sandbox.Spec {
			return sandbox.Spec{Command: argv, RootFS: root}
		},
	})
}

// BenchmarkProcessMCPReady: the todo environment, from Start to an initialized MCP session,
// as a host binary under each isolation and from an image's root file system under bubblewrap.
func BenchmarkProcessMCPReady(b *testing.B) {
	root := sandboxtest.Root(b)
	for _, c := range []struct {
		name, isolation string
		spec            sandbox.Spec
		runAs           int
	}{
		{"bubblewrap/image", sandbox.IsolationBubblewrap, sandbox.Spec{Command: sandboxtest.TodoCommand, RootFS: root}, 0},
		// As root (where the worker is), the way sandboxes ran before they had a user of their own.
		{"bubblewrap/image/as-root", sandbox.IsolationBubblewrap, sandbox.Spec{Command: sandboxtest.TodoCommand, RootFS: root}, -1},
		{"bubblewrap/host-binary", sandbox.IsolationBubblewrap, sandbox.Spec{Command: []string{filepath.Join(root, "app", "env")}}, 0},
		{"none/host-binary", sandbox.IsolationNone, sandbox.Spec{Command: []string{filepath.Join(root, "app", "env")}}, 0},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: b.TempDir(), Isolation: c.isolation, RunAs: c.runAs})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			sandboxtest.BenchmarkMCPReady(b, p, c.spec)
		})
	}
}
