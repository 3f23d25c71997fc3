package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestASandboxWorksInAnothersWorkDirAndLeavesIt(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			first := start(t, p, Spec{ID: "first", Command: []string{"sleep", "60"}})
			_, second := run(t, p, Spec{ID: "second", Command: []string{"sh", "-c", `echo "from $PWD" > shared.txt`}, WorkDir: first.WorkDir()})
			if code := exitCode(t, second); code != 0 {
				t.Fatalf("the second sandbox exited %d: %q", code, second.logs.Tail(3))
			}
			if err := second.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(first.WorkDir(), "shared.txt"))
			if err != nil || string(b) != "from "+first.WorkDir()+"\n" {
				t.Errorf("the first sandbox's work dir holds %q (%v) once the second stopped; want the file it wrote there", b, err)
			}
		})
	}
	p := newProvider(t, IsolationNone)
	if _, err := p.Start(t.Context(), Spec{ID: "x", Command: []string{"true"}, WorkDir: "relative"}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("a relative work dir: %v, want ErrInvalidSpec", err)
	}
}

func TestACompanionTakesNoSlot(t *testing.T) {
	p := newProvider(t, IsolationNone, func(o *ProcessOptions) { o.MaxSandboxes = 1 })
	start(t, p, Spec{ID: "env", Command: []string{"sleep", "60"}})
	companion := start(t, p, Spec{ID: "agent", Command: []string{"sleep", "60"}, Companion: true})
	if n := p.Running(); n != 1 {
		t.Errorf("Running() = %d with a sandbox and its companion, want 1", n)
	}
	if _, err := p.Start(t.Context(), Spec{ID: "another", Command: []string{"true"}}); !errors.Is(err, ErrCapacity) {
		t.Errorf("a second sandbox on a host of one slot: %v, want ErrCapacity", err)
	}
	if err := companion.Stop(context.Background()); err != nil || p.Running() != 1 {
		t.Errorf("after the companion stopped: %v, Running() = %d, want 1", err, p.Running())
	}
}
