package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// WebDeps installs the web app's npm dependencies exactly as web/package-lock.json pins them
// (npm ci, with the npm cache under .cache), once per lockfile, and returns web/'s path. Test
// binaries running at once take turns.
func WebDeps(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			MissingTool(t, tool)
		}
	}
	root := ModuleRoot(t)
	web := filepath.Join(root, "web")
	lock, err := os.ReadFile(filepath.Join(web, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	marker := filepath.Join(web, "node_modules", ".proctor-lockfile-sha256")
	if b, err := os.ReadFile(marker); err == nil && string(b) == want {
		return web
	}
	unlock, err := LockFile(filepath.Join(root, ".cache", "web-npm.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if b, err := os.ReadFile(marker); err == nil && string(b) == want {
		return web
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(root, ".cache", "npm-cache"))
	cmd.Dir = web
	if out, err := cmd.CombinedOutput(); err != nil {
		Unavailable(t, "npm ci in web/: %v\n%s", err, out)
	}
	if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	return web
}

// Chromium is the path of the Chromium the browser tests drive (Debian's package).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	MissingTool(t, "chromium")
	return ""
}
