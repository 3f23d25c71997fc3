package environments_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.Cleanup(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// proctor-examples serves every bundled example over stdio, as `proctor example-env NAME`
// does: the images of `proctor dev`'s bundled builds run it when it is beside proctor.
func TestProctorExamplesServesEachExample(t *testing.T) {
	bin := testenv.StaticProgram(t, "cmd/proctor-examples")
	for _, name := range environments.Names() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			cmd := exec.Command(bin, "example-env", name)
			stdout, stdin := testenv.StartPiped(t, cmd)
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // it may have exited
			env, err := agent.Connect(ctx, stdout, stdin, agent.ConnectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			tools, err := env.Tools(ctx)
			if err != nil || len(tools) == 0 {
				t.Fatalf("%s's tools = %v, %v", name, tools, err)
			}
			if _, err := env.Scenario(ctx, "no-such-scenario", nil); err == nil {
				t.Errorf("%s: an unknown scenario was found", name)
			}
		})
	}
}

// A command used wrongly says how to use it (status 2); an unknown example names the examples
// there are (status 1).
func TestProctorExamplesUsage(t *testing.T) {
	bin := testenv.StaticProgram(t, "cmd/proctor-examples")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{nil, 2, "Usage: proctor-examples example-env NAME"},
		{[]string{"todo"}, 2, "NAME is one of: todo, game2048, canvas"},
		{[]string{"--help"}, 0, "Usage: proctor-examples example-env NAME"},
		{[]string{"example-env"}, 2, "NAME is one of: todo, game2048, canvas"},
		{[]string{"example-env", "nope"}, 1, `no bundled example "nope"; the examples are: todo, game2048, canvas`},
		{[]string{"example-env", "--help"}, 0, "Serve a bundled example environment over MCP"},
	} {
		var stderr bytes.Buffer
		cmd := exec.Command(bin, c.args...)
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("proctor-examples %v: status %d, want %d; stderr:\n%s", c.args, code, c.code, stderr.String())
		}
	}
}
