package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Listening checks a provider that honours Spec.Listen, with at most one sandbox at a time (the
// capacity p was made with), running img (Root's image): a companion's command finds its
// listener at 127.0.0.1:PORT from its first instruction, served from outside, for ten
// connections at once too; it exits with its command's status; and it takes no slot.
func Listening(t *testing.T, p sandbox.Provider, img *sandbox.Image) {
	t.Helper()
	busy, err := p.Start(t.Context(), sandbox.Spec{ID: "busy", Command: []string{"/bin/sleep", "300"}, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Stop(context.Background()) //nolint:errcheck // the test is over
	run := func(id, script string) (string, error) {
		return RunListening(t, p, sandbox.Spec{ID: id, Command: []string{"/bin/sh", "-c", script}, Image: img, Companion: true}, 7777)
	}
	out, err := run("fetch", `/bin/busybox wget -q -O- http://127.0.0.1:7777/first && `+
		`for i in 0 1 2 3 4 5 6 7 8 9; do /bin/busybox wget -q -O- http://127.0.0.1:7777/$i & done; wait`)
	var status sandbox.ExitStatus
	if !strings.HasPrefix(out, "served /first;") || strings.Count(out, "served") != 11 || !errors.As(err, &status) || status.ExitCode() != 0 {
		t.Errorf("fetching through the listener: %q, %v; want the first body, then ten more, and exit status 0", out, err)
	}
	if _, err := run("fail", "exit 3"); !errors.As(err, &status) || status.ExitCode() != 3 {
		t.Errorf("a command that exits 3 with a listener: %v, want exit status 3", err)
	}
	if n := p.Running(); n != 1 {
		t.Errorf("Running() = %d with companions, want 1", n)
	}
}

// RunListening runs spec, a command that ends by itself, with a listener inside at 127.0.0.1:port
// (Spec.Listen) that an HTTP server outside the sandbox serves, answering "served PATH;" to every
// request. It returns what the command wrote to stdout and how it exited (the sandbox's Err),
// and fails the test unless the provider handed the listener over exactly once.
func RunListening(t testing.TB, p sandbox.Provider, spec sandbox.Spec, port int) (string, error) {
	t.Helper()
	var served []net.Listener
	spec.Listen = &sandbox.Listen{Port: port, Ready: func(ln net.Listener) {
		served = append(served, ln)
		go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "served %s;", r.URL.Path) })) //nolint:errcheck // ends with ln
	}}
	sb, err := p.Start(t.Context(), spec)
	if err != nil {
		return "", err
	}
	defer sb.Stop(context.Background()) //nolint:errcheck // it has exited
	sb.Stdin().Close()
	out, _ := io.ReadAll(sb.Stdout())
	<-sb.Done()
	for _, ln := range served {
		ln.Close()
	}
	if len(served) != 1 {
		t.Errorf("Ready called %d times, want once", len(served))
	}
	return string(out), sb.Err()
}
