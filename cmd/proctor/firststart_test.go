package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A dev whose ports are taken says which and how to choose another, instead of failing deep in
// the Temporal server.
func TestDevOnBusyPortsSaysWhich(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busyAddr := l.Addr().String()
	_, busyPort, _ := net.SplitHostPort(busyAddr)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"api":         {[]string{"--http-addr", busyAddr}, "the API cannot listen on " + busyAddr + ": the port is in use (another proctor dev?); stop that process, or choose another port with --http-addr"},
		"temporal":    {[]string{"--temporal-address", busyAddr}, "Temporal cannot listen on " + busyAddr + ": the port is in use"},
		"temporal ui": {[]string{"--temporal-address", "127.0.0.1:0", "--temporal-ui-port", busyPort}, "the Temporal UI cannot listen on " + busyAddr + ": the port is in use"},
	} {
		args := append([]string{"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--temporal-address", "127.0.0.1:0", "--temporal-ui-port", "0"}, tc.args...)
		var stderr bytes.Buffer
		err := cmdDev(context.Background(), args, io.Discard, &stderr, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s busy: %v; want %q", name, err, tc.want)
		}
		if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
			t.Errorf("%s busy: a stack trace:\n%s", name, stderr.String())
		}
	}
}

// A first start that stopped part-way resumes at the next: a team made without its owner gets
// one and a key, a lost key file gets a new key of the same member, and the demo is seeded once.
func TestDevFirstStartResumes(t *testing.T) {
	dataDir := t.TempDir()
	admin := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(t.Context(), append(append([]string{}, args...), "--data-dir", dataDir), &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	// Interrupted after the team: the database has a team and no member.
	admin("admin", "team", "create", "--name", "default")

	dev := startDev(t, dataDir)
	first := dev.info.APIKey
	c := api{t: t, base: dev.info.APIURL, key: first}
	if first == "" || c.tasksetID("demo") == "" {
		t.Fatalf("the resumed first start: key %q, demo %q", first, c.tasksetID("demo"))
	}
	if teams := regexp.MustCompile(`(?m)^[0-9a-f-]{36}`).FindAllString(admin("admin", "team", "list"), -1); len(teams) != 1 {
		t.Errorf("teams after the resumed bootstrap = %v, want the one the first start made", teams)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "seeded")); err != nil {
		t.Errorf("the seed mark: %v", err)
	}
	dev.stop(t)

	// The key file and the seed mark are lost: the next start makes a new key and seeds again,
	// without a second demo.
	for _, f := range []string{credentialsFile, "seeded"} {
		if err := os.Remove(filepath.Join(dataDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	dev = startDev(t, dataDir, "--log-level", "info")
	if dev.info.APIKey == "" || dev.info.APIKey == first || !strings.Contains(dev.errOut.String(), "the key file was missing") {
		t.Fatalf("after the key file was lost: key %q\n%s", dev.info.APIKey, dev.errOut)
	}
	c.key = dev.info.APIKey
	c.base = dev.info.APIURL
	var page struct{ Total int }
	c.call("GET", "/v2/tasksets?search=demo", nil, &page)
	var tasks struct{ Total int }
	c.call("GET", "/v2/tasksets/"+c.tasksetID("demo")+"/tasks", nil, &tasks)
	if page.Total != 1 || tasks.Total != 3 {
		t.Errorf("demo tasksets %d, demo tasks %d; want 1 and 3", page.Total, tasks.Total)
	}
	// From any directory (no data dir there), client commands find the last instance the user
	// started through the user's config dir.
	if out, err := func() (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), []string{"models", "--data-dir", filepath.Join(t.TempDir(), "elsewhere")}, &out, io.Discard)
		return out.String(), err
	}(); err != nil || !strings.Contains(out, "oracle") {
		t.Errorf("proctor models from another directory: %v\n%s", err, out)
	}
	// Client commands find the new key through the file.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"jobs", "--data-dir", dataDir, "--api-url", c.base}, &out, io.Discard); err != nil {
		t.Errorf("proctor jobs with the recovered key: %v", err)
	}
}
