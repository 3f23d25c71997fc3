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
