// Command proctor is the whole platform in one binary: the all-in-one `dev` mode, the production
// `server`, `worker` and `migrate` processes, `admin` commands against the configured database, and
// `openapi`, which prints the API document without starting anything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/config"
)

const usage = `proctor — a self-hostable evaluation platform for AI agents

Usage:
  proctor dev        start everything in one process on embedded defaults (API, Temporal + UI, worker, SQLite, local storage)
  proctor server     run the API server (Postgres, an existing Temporal, a bucket)
  proctor worker     run a Temporal worker for the task queues in --queues
  proctor migrate    apply pending database migrations and exit
  proctor admin      manage teams, members, API keys, sessions and projects in the configured database
  proctor openapi    print the OpenAPI 3.1 document (YAML) without starting anything
  proctor example-env NAME [--transport stdio|http|sse] [--port 8765]
                     serve a bundled example environment (todo, game2048, canvas)

Client commands (against PROCTOR_API_URL with PROCTOR_API_KEY; default: the local dev instance):
  proctor tasks upload FILE.json|FILE.jsonl [--taskset NAME]   create or update tasks
  proctor tasks export NAME [-o FILE]                          a taskset in the portable upload shape
  proctor tasksets list [--search S] [--public] [--sort KEY]   your team's tasksets
  proctor tasksets show NAME                                   a taskset's tasks
  proctor eval TASKSET --model M [--group-size N] [--max-concurrent K]
                                                               run a job, with live progress and a per-task table
  proctor trace TRACE_ID [-f]                                  an attempt's trajectory (-f follows it live)
  proctor jobs                                                 your team's jobs, newest first
  proctor jobs show JOB                                        a job's per-task results and the attempts to look at
  proctor jobs watch JOB                                       follow a running job again (after Ctrl-C or a lost connection)
  proctor traces [--job JOB] [--status S]                      a job's attempts (default: your newest job's)
  proctor models                                               the models you can run
  proctor workers                                              the live workers per task queue, and the sandboxes they run at once
  proctor env deploy DIR [--name N]                            build an environment from source, print its scenarios
  proctor usage [--days 7] [--by model|route|api_key|user|byok] inference calls, environment time and cost per day
  proctor instances ENV [--all] [--stop ID,…]                  an environment's sandboxes; stop some
  proctor version    print the version

Every command takes --help. Settings come from flags or PROCTOR_* environment variables.
`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var st exitStatus
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errFlags) && !errors.Is(err, errUsage) && !errors.As(err, &st) {
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
	if errors.Is(err, flag.ErrHelp) || errors.Is(err, errUsage) || errors.Is(err, errFlags) {
		return 2
	}
	return 1
}

var errUsage = errors.New("usage")

// exitStatus is a command's exit status when it has already said why.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// cmdExampleEnv serves a bundled example environment, as its own command would: the images
// `proctor dev` builds without a Go toolchain run this.
func cmdExampleEnv(args []string, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "Usage: proctor example-env NAME [--transport stdio|http|sse] [--port 8765]\n\nServe a bundled example environment over MCP. NAME is one of: %s.\n", strings.Join(environments.Names(), ", "))
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			return nil
		}
		return errUsage
	}
	ex, ok := environments.Lookup(args[0])
	if !ok {
		return fmt.Errorf("no bundled example %q; the examples are: %s", args[0], strings.Join(environments.Names(), ", "))
	}
	if code := envserver.MainArgs("proctor example-env "+ex.Name, args[1:], ex.New); code != 0 {
		return exitStatus(code)
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "dev":
		return cmdDev(ctx, rest, stdout, stderr, nil)
	case "server":
		return cmdServer(ctx, rest, stderr)
	case "worker":
		return cmdWorker(ctx, rest, stderr)
	case "migrate":
		return cmdMigrate(ctx, rest, stdout, stderr)
	case "admin":
		return cmdAdmin(ctx, rest, stdout, stderr)
	case "tasks":
		return cmdTasks(ctx, rest, stdout, stderr)
	case "tasksets":
		return cmdTasksets(ctx, rest, stdout, stderr)
	case "eval":
		return cmdEval(ctx, rest, stdout, stderr)
	case "trace":
		return cmdTrace(ctx, rest, stdout, stderr)
	case "jobs":
		return cmdJobs(ctx, rest, stdout, stderr)
	case "env":
		return cmdEnv(ctx, rest, stdout, stderr)
	case "usage":
		return cmdUsage(ctx, rest, stdout, stderr)
	case "instances":
		return cmdInstances(ctx, rest, stdout, stderr)
	case "traces":
		return cmdTraces(ctx, rest, stdout, stderr)
	case "models":
		return cmdModels(ctx, rest, stdout, stderr)
	case "workers":
		return cmdWorkers(ctx, rest, stdout, stderr)
	case "example-env":
		return cmdExampleEnv(rest, stderr)
	case "openapi":
		spec, err := httpapi.Spec()
		if err != nil {
			return err
		}
		_, err = stdout.Write(spec)
		return err
	case "version", "--version":
		fmt.Fprintln(stdout, "proctor", versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "proctor: unknown command %q; the commands are listed by: proctor help\n", cmd)
		return errUsage
	}
}

// parseConfig binds the shared configuration to a command's flags and parses them.
func parseConfig(name, summary string, args []string, stderr io.Writer) (*config.Config, *flag.FlagSet, error) {
	cfg := &config.Config{}
	fs := flag.NewFlagSet("proctor "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: proctor %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	cfg.Bind(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	return cfg, fs, nil
}

func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(cfg.LogLevel))); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
