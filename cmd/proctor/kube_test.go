package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerOnKubernetesSaysWhatIsMissing starts workers with the kubernetes provider as an
// operator would, and checks that each setting reaches the provider: a bad node selector, no
// registry, and a cluster that does not answer are refused at start, each saying what to fix.
// (No cluster is reachable from here; the provider itself is tested against a fake API server
// in internal/sandbox/kube.)
func TestWorkerOnKubernetesSaysWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "proctor.db")
	mustRun(t, "migrate", "--database-url", db)
	ts := startTemporal(t)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	worker := func(extra ...string) error {
		args := append([]string{"worker", "--database-url", db, "--temporal-address", ts.FrontendAddress(), "--queues", "sandboxes-cpu",
			"--sandbox-provider", "kubernetes", "--kubeconfig", kubeconfig, "--log-level", "error"}, extra...)
		return run(t.Context(), args, io.Discard, io.Discard)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kube-node-selector", "pool"}, "want key=value pairs"},
		{nil, "--kube-registry"},
		{[]string{"--kube-registry", "registry.example.com/envs", "--kube-namespace", "evals"}, "namespace evals"},
	} {
		if err := worker(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("worker %v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
