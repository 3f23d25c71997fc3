package sandbox

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A provider sweeps, under its root, what providers that are gone left (their owner directory
// unlocked), keeps a live provider's, and removes its own when it closes.
func TestOwnerDirsOfDeadProvidersAreSwept(t *testing.T) {
	root := t.TempDir()
	live, err := claimOwnerDir(root, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer live.release() //nolint:errcheck
	if err := os.WriteFile(filepath.Join(live.path, "work"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Left by a killed provider: its lock file, nobody holding it, and a work dir.
	dead := filepath.Join(root, ownerPrefix+"killed")
	if err := os.MkdirAll(filepath.Join(dead, "sandbox-1", "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Killed before it locked, a while ago; and one starting now, not locked yet.
	old := time.Now().Add(-2 * time.Minute)
	if err := os.MkdirAll(filepath.Join(root, ownerPrefix+"unlocked"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(root, ownerPrefix+"unlocked"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, ownerPrefix+"starting"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not a provider's: left alone.
	if err := os.MkdirAll(filepath.Join(root, "other"), 0o755); err != nil {
		t.Fatal(err)
	}

	next, err := claimOwnerDir(root, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{dead, filepath.Join(root, ownerPrefix+"unlocked")} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s was not swept: %v", gone, err)
		}
	}
	for _, kept := range []string{filepath.Join(live.path, "work"), filepath.Join(root, "other"), filepath.Join(root, ownerPrefix+"starting"), next.path} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
	if err := next.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(next.path); !os.IsNotExist(err) {
		t.Errorf("a closed provider's directory stays: %v", err)
	}
}
