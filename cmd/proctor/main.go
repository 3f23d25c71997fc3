// Command proctor is the whole platform in one binary: the all-in-one `dev` mode, the production
// `server`, `worker` and `migrate` processes, `admin` commands against the configured database, and
// `openapi`, which prints the API document without starting anything.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/tracing"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var st exitStatus
		if err != errUsage && !errors.As(err, &st) { //nolint:errorlint // a bare errUsage was explained where it was returned
			fmt.Fprintln(os.Stderr, "proctor:", err)
		}
		stop()
		os.Exit(exitCode(err))
	}
}

func exitCode(err error) int {
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	if errors.Is(err, errUsage) || errors.Is(err, errFlags) {
		return 2
	}
	return 1
}

// errUsage is a command used wrongly (exit status 2); bare, it was explained where it was
// returned, and wrapped, its message says how to use the command.
var errUsage = errors.New("usage")

// errFlags marks a flag error (exit status 2).
var errFlags = errors.New("bad flags")

// exitStatus is a command's exit status when it has already said why.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// cmdExampleEnv serves a bundled example environment, as its own command would: the images
// `proctor dev` builds without a Go toolchain run this when no proctor-examples lies beside
// proctor.
func cmdExampleEnv(args []string, stderr io.Writer) error {
	if code := environments.Main("proctor example-env", args, stderr); code != 0 {
		return exitStatus(code)
	}
	return nil
}

func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel))); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts))), nil
}
