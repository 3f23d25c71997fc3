package testenv

import (
	"io"
	"os/exec"
	"testing"
)

// StartPiped starts cmd with pipes to its stdout and stdin, as an MCP client over stdio needs;
// the caller waits for it.
func StartPiped(t testing.TB, cmd *exec.Cmd) (stdout io.ReadCloser, stdin io.WriteCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdout, stdin
}
