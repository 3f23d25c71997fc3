package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// goModules is what FreshModuleCache records: the machine's own module settings, which a module's
// author uses (AuthorGoEnv), and the mirrors ModuleMirror made.
var goModules struct {
	mu sync.Mutex
	// machineCache and machineProxy are the machine's GOMODCACHE and GOPROXY before
	// FreshModuleCache replaced the first; machineCache is "" until it ran.
	machineCache, machineProxy string
	// root holds the fresh cache and the mirrors.
	root    string
	mirrors map[string]string
}

// FreshModuleCache points every go command this test binary runs (its tests' and the code's under
// test, which inherit the environment) at a module cache of its own, empty at the start: a build
// worker starts with none (deploy/Dockerfile's builder stage carries none), so a module a build
// fetches must come from the proxy it is given, and the warm cache of the machine running the
// tests cannot hide one that it would lack. A TestMain calls it before m.Run and the returned
// function after.
func FreshModuleCache() (cleanup func() error, err error) {
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY").Output()
	if err != nil {
		return nil, fmt.Errorf("testenv: go env: %w", err)
	}
	settings := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(settings) != 2 || settings[0] == "" {
		return nil, fmt.Errorf("testenv: go env GOMODCACHE GOPROXY printed %q", out)
	}
	root, err := os.MkdirTemp("", "proctor-test-gomodules-")
	if err != nil {
		return nil, err
	}
	goModules.mu.Lock()
	defer goModules.mu.Unlock()
	goModules.machineCache, goModules.machineProxy = settings[0], settings[1]
	goModules.root, goModules.mirrors = root, map[string]string{}
	if err := os.Setenv("GOMODCACHE", filepath.Join(root, "cache")); err != nil {
		return nil, err
	}
	return func() error {
		os.Setenv("GOMODCACHE", goModules.machineCache) //nolint:errcheck // restores what was set
		return removeModuleCaches(root)
	}, nil
}

// AuthorGoEnv is the environment of a go command run as a module's author runs it on their own
// machine, which reaches a module proxy: this machine's module cache and proxy, never the fresh
// cache FreshModuleCache gave the build worker. It is os.Environ() without it when FreshModuleCache
// did not run.
func AuthorGoEnv() []string {
	goModules.mu.Lock()
	defer goModules.mu.Unlock()
	env := append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if goModules.machineCache != "" {
		env = append(env, "GOMODCACHE="+goModules.machineCache)
	}
	return env
}

// ModuleMirror returns a GOPROXY serving exactly the modules the go.mod in dir requires, as a build
// worker's configured proxy serves them: a file:// proxy filled once per test binary by `go mod
// download` in dir, from this machine's module cache where it holds them and its configured proxy
// where it does not (a fresh machine). A build given it fetches nothing else, so a build that
// needs a module beyond them (the test-only requirements of a dependency, say) fails here as it
// would fail a worker. It needs FreshModuleCache.
func ModuleMirror(t testing.TB, dir string) string {
	t.Helper()
	goModules.mu.Lock()
	defer goModules.mu.Unlock()
	if goModules.root == "" {
		t.Fatal("testenv: ModuleMirror needs FreshModuleCache in the package's TestMain")
	}
	if proxy, ok := goModules.mirrors[dir]; ok {
		return proxy
	}
	mirror := filepath.Join(goModules.root, fmt.Sprintf("mirror%d", len(goModules.mirrors)))
	download := exec.Command("go", "mod", "download")
	download.Dir = dir
	download.Env = append(os.Environ(), "GOFLAGS=-modcacherw", "GOWORK=off", "GOMODCACHE="+mirror,
		"GOPROXY="+fileProxy(goModules.machineCache)+","+goModules.machineProxy)
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("testenv: fill a module mirror for %s: %v\n%s", dir, err, out)
	}
	proxy := fileProxy(mirror)
	goModules.mirrors[dir] = proxy
	return proxy
}

// MachineProxy is a GOPROXY for a build of this repository's own packages: this machine's module
// cache, which compiled them, and its configured proxy for what the cache lacks. It needs
// FreshModuleCache.
func MachineProxy(t testing.TB) string {
	t.Helper()
	goModules.mu.Lock()
	defer goModules.mu.Unlock()
	if goModules.root == "" {
		t.Fatal("testenv: MachineProxy needs FreshModuleCache in the package's TestMain")
	}
	return fileProxy(goModules.machineCache) + "," + goModules.machineProxy
}

// fileProxy is the GOPROXY that serves the modules a module cache holds: its download directory
// has a proxy's layout.
func fileProxy(cache string) string {
	return "file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download"))
}

// removeModuleCaches removes root, whose module caches the go command wrote read-only.
func removeModuleCaches(root string) error {
	var errs []error
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error { //nolint:errcheck // errors are collected
		if err == nil && d.IsDir() {
			errs = append(errs, os.Chmod(path, 0o755))
		}
		return nil
	})
	return errors.Join(append(errs, os.RemoveAll(root))...)
}
