package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/config"
)

// runFunc runs a command once its flags are parsed, with its positional arguments.
type runFunc func(ctx context.Context, pos []string) error

// flagsBody defines a command's flags on a Go flag set (the shared helpers, clientFlags and
// config.Bind, define theirs there) and returns what runs once they are parsed.
type flagsBody func(fs *flag.FlagSet) runFunc

// withFlags gives cmd the flags body defines, parsed by cobra (GNU style: --name value or
// --name=value, anywhere among the arguments; one-letter flags also as -x), and runs body's
// function with the positional arguments.
func withFlags(cmd *cobra.Command, body flagsBody) *cobra.Command {
	fs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	run := body(fs)
	cmd.Flags().AddGoFlagSet(fs)
	cmd.RunE = func(c *cobra.Command, args []string) error { return run(c.Context(), args) }
	return cmd
}

// clientCommand is the body of a client command without flags of its own: the client flags
// (--api-url, --api-key, --data-dir), then fn with the API client.
func clientCommand(fn func(ctx context.Context, c *apiClient, pos []string) error) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			return fn(ctx, c, pos)
		}
	}
}

// jsonClientCommand is clientCommand with --json (see jsonFlag): fn prints JSON when asJSON.
func jsonClientCommand(fn func(ctx context.Context, c *apiClient, pos []string, asJSON bool) error) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		asJSON := jsonFlag(fs)
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) error {
			return fn(ctx, c, pos, *asJSON)
		})(fs)
	}
}

// configCommand makes a command whose flags are the shared configuration's (each also read from
// its PROCTOR_* variable), run with the parsed configuration.
func configCommand(cmd *cobra.Command, run func(ctx context.Context, cfg *config.Config) error) *cobra.Command {
	cmd.Args = noArgs
	return withFlags(cmd, func(fs *flag.FlagSet) runFunc {
		cfg := &config.Config{}
		cfg.Bind(fs)
		return func(ctx context.Context, _ []string) error { return run(ctx, cfg) }
	})
}

// execute runs cmd as the whole command line, with args.
func execute(ctx context.Context, cmd *cobra.Command, args []string) error {
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(flagError)
	if args == nil {
		args = []string{} // cobra reads os.Args for nil: no arguments are none, not the process's
	}
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// kindError is an error of a kind (errUsage, errFlags) that sets the exit status, with its own
// message.
type kindError struct {
	kind error
	msg  string
}

func (e kindError) Error() string        { return e.msg }
func (e kindError) Is(target error) bool { return target == e.kind }

// usagef is a wrong use of a command (exit status 2) that says what is wrong.
func usagef(format string, a ...any) error {
	return kindError{errUsage, fmt.Sprintf(format, a...)}
}

// flagError says which command's help lists the flags.
func flagError(c *cobra.Command, err error) error {
	return kindError{errFlags, fmt.Sprintf("%v (see %s --help)", err, c.CommandPath())}
}

// usageError is a wrong use of a command, with the line that says how to use it.
func usageError(c *cobra.Command) error {
	return usagef("usage: %s (see %s --help)", c.UseLine(), c.CommandPath())
}

// exactArgs wants n positional arguments.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError(c)
		}
		return nil
	}
}

// idArg wants one positional argument, the id of a kind of thing: a UUID, as the list command
// that names the thing prints it, or its start, which the command resolves (apiClient.resolveID)
// among what the caller can list. A mistyped id is a usage error that says what an id looks like
// and where to find one, not the server's validation error.
func idArg(kind, listedBy string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError(c)
		}
		if !idPrefix.MatchString(args[0]) {
			return usagef("%q is not a %s id: %s ids are UUIDs (e.g. 0b6c1d7e-4f1a-4c1e-9a52-2f3d5e8b9c10), as %s lists them, or their first characters (at least 4)", args[0], kind, kind, listedBy)
		}
		return nil
	}
}

// group makes cmd a command that only holds subcommands: run alone it prints its usage, and an
// unknown subcommand is an error that suggests the nearest.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	// `proctor nope --api-url U` is an unknown command, not an unknown flag of the group.
	cmd.FParseErrWhitelist.UnknownFlags = true
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			fmt.Fprintf(c.ErrOrStderr(), "%s\n\n%s", cmp.Or(c.Long, c.Short), c.UsageString())
			return errUsage
		}
		hint := ""
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			hint = "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usagef("unknown command %q for %s%s (see %s --help)", args[0], c.CommandPath(), hint, c.CommandPath())
	}
	return cmd
}

// noArgs wants none.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q (see %s --help)", c.CommandPath(), args[0], c.CommandPath())
	}
	return nil
}

// run runs the proctor command line args.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return execute(ctx, newRoot(stdout, stderr), args)
}

// newRoot is the proctor command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := group(&cobra.Command{
		Use:   "proctor",
		Short: "A self-hostable evaluation platform for AI agents",
		Long: "proctor — a self-hostable evaluation platform for AI agents.\n\n" +
			"Client commands talk to PROCTOR_API_URL with PROCTOR_API_KEY (or --api-url/--api-key); by default, to the\n" +
			"last `proctor dev` you started. Settings come from flags or PROCTOR_* environment variables.",
		Version: versionString(),
	})
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate("proctor {{.Version}}\n")
	root.AddGroup(&cobra.Group{ID: "platform", Title: "Run the platform:"},
		&cobra.Group{ID: "client", Title: "Use it (client commands):"})

	for _, c := range platformCommands(stdout, stderr) {
		c.GroupID = "platform"
		root.AddCommand(c)
	}
	for _, c := range clientCommands(stdout, stderr) {
		c.GroupID = "client"
		root.AddCommand(c)
	}
	return root
}

// platformCommands are the commands that run the platform, or a part of it.
func platformCommands(stdout, stderr io.Writer) []*cobra.Command {
	return []*cobra.Command{
		devCommand(stdout, stderr, nil),
		serverCommand(stderr),
		workerCommand(stderr),
		migrateCommand(stdout, stderr),
		adminCommand(stdout, stderr),
		{Use: "openapi", Short: "Print the OpenAPI 3.1 document (YAML) without starting anything", Args: noArgs,
			RunE: func(*cobra.Command, []string) error {
				spec, err := httpapi.Spec()
				if err != nil {
					return err
				}
				_, err = stdout.Write(spec)
				return err
			}},
		{Use: "example-env NAME [--transport stdio|http|sse] [--port 8765]", Short: "Serve a bundled example environment (" + strings.Join(environments.Names(), ", ") + ") over MCP",
			ValidArgs: environments.Names(), DisableFlagParsing: true,
			RunE: func(_ *cobra.Command, args []string) error { return cmdExampleEnv(args, stderr) }},
		{Use: "healthcheck [URL]", Short: "Exit 0 when URL (default http://127.0.0.1:8080/readyz) answers 200: a container's health check",
			Args: cobra.MaximumNArgs(1), RunE: func(c *cobra.Command, args []string) error { return cmdHealthcheck(c.Context(), args, stdout) }},
		{Use: "version", Short: "Print the version", Args: noArgs,
			Run: func(*cobra.Command, []string) { fmt.Fprintln(stdout, "proctor", versionString()) }},
	}
}

// clientCommands are the commands that use a running platform through its API.
func clientCommands(stdout, stderr io.Writer) []*cobra.Command {
	tasks := group(&cobra.Command{Use: "tasks", Short: "Upload and export tasks"})
	tasks.AddCommand(
		withFlags(&cobra.Command{Use: "upload FILE.json|FILE.jsonl", Short: "Create or update tasks from a file", Args: exactArgs(1)}, cmdTasksUpload(stdout, stderr)),
		withFlags(&cobra.Command{Use: "export NAME", Short: "Print a taskset in the portable upload shape (uploads into any instance)", Args: exactArgs(1)}, cmdTasksExport(stdout, stderr)),
		withFlags(&cobra.Command{Use: "import harbor PATH...", Short: "Import Harbor-format tasks (Terminal-Bench): task folders, a dataset folder, or a .tar.gz/.zip; each environment/ is built once with the shell server",
			Args: cobra.MinimumNArgs(2)}, cmdTasksImportHarbor(stdout, stderr)))
	tasksets := group(&cobra.Command{Use: "tasksets", Short: "Your team's tasksets"})
	tasksets.AddCommand(
		withFlags(&cobra.Command{Use: "list", Short: "List your team's tasksets", Args: noArgs}, cmdTasksetsList(stdout)),
		withFlags(&cobra.Command{Use: "show NAME", Short: "A taskset's tasks", Args: exactArgs(1)}, cmdTasksetsShow(stdout)))
	jobs := withFlags(&cobra.Command{Use: "jobs", Short: "Your team's jobs, newest first", Args: noArgs}, cmdJobs(stdout))
	jobs.AddCommand(
		withFlags(&cobra.Command{Use: "show JOB", Short: "A job's summary, per-task results and the attempts to look at", Args: idArg("job", "proctor jobs")}, cmdJobsShow(stdout)),
		withFlags(&cobra.Command{Use: "watch JOB", Short: "Follow a running job again (after Ctrl-C or a lost connection), then print its table", Args: idArg("job", "proctor jobs")}, cmdJobsWatch(stdout, stderr)),
		withFlags(&cobra.Command{Use: "cancel JOB", Short: "Cancel every attempt of a job (live ones stop after their sandboxes are torn down)", Args: idArg("job", "proctor jobs")}, cmdJobsCancel(stdout)),
		withFlags(&cobra.Command{Use: "retry JOB", Short: "Run a run_list job's failed attempts again, in the job (--errors infra: no reward; all: any error)", Args: idArg("job", "proctor jobs")}, cmdJobsRetry(stdout)),
		withFlags(&cobra.Command{Use: "resume JOB", Short: "Go on with a job paused at its max_cost_usd (--max-cost-usd N: a higher ceiling; --lift-ceiling: none)", Args: idArg("job", "proctor jobs")}, cmdJobsResume(stdout)))
	env := group(&cobra.Command{Use: "env", Short: "Deploy and list environments"})
	env.AddCommand(withFlags(&cobra.Command{Use: "list", Short: "The environments you can run: scenarios and latest build", Args: noArgs}, cmdEnvList(stdout)))
	env.AddCommand(withFlags(&cobra.Command{Use: "deploy DIR", Short: "Build an environment from source, make it the latest, and print its scenarios", Args: exactArgs(1)}, cmdEnvDeploy(stdout, stderr)))
	env.AddCommand(withFlags(&cobra.Command{Use: "set-latest BUILD", Short: "Make a succeeded build the one new runs of its environment use", Args: idArg("build", "proctor env deploy")}, cmdEnvSetLatest(stdout)))
	env.AddCommand(withFlags(&cobra.Command{Use: "require-certification ENV", Short: "Make a build the latest only once its latest certification passed (--off: no longer)", Args: exactArgs(1)}, cmdEnvRequireCertification(stdout)))
	env.AddCommand(withFlags(&cobra.Command{Use: "certify BUILD", Short: "Certify a build: the oracle k times and an idle agent once on each task of a taskset; flags flaky, oracle-failing and no-work tasks", Args: idArg("build", "proctor env deploy")}, cmdEnvCertify(stdout, stderr)))
	env.AddCommand(withFlags(&cobra.Command{Use: "check BUILD", Short: "Replay a finished job on a build: per attempt, the reward before and after and the first step a tool result differs",
		Args: idArg("build", "proctor env deploy")}, cmdEnvCheck(stdout, stderr)))

	agentCmd := group(&cobra.Command{Use: "agent", Short: "Deploy and list the agents you bring"})
	agentCmd.AddCommand(
		withFlags(&cobra.Command{Use: "deploy DIR", Short: "Build an agent from source (a Dockerfile, or a Go main package) and make it the latest", Args: exactArgs(1)}, cmdAgentDeploy(stdout)),
		withFlags(&cobra.Command{Use: "list", Short: "Your team's agents and their latest builds", Args: noArgs}, cmdAgentList(stdout)))

	return []*cobra.Command{
		agentCmd,
		withFlags(&cobra.Command{Use: "eval TASKSET --model MODEL", Short: "Run a job with live progress, then a per-task table and its cost",
			Long: "Runs every task of TASKSET (a taskset name: see proctor tasksets list) with MODEL (see proctor models),\n" +
				"follows the job live, then prints a per-task table and the job's cost. Ctrl-C cancels the job.",
			Args: exactArgs(1)}, cmdEval(stdout, stderr)),
		withFlags(&cobra.Command{Use: "trace TRACE_ID", Short: "An attempt's trajectory, step by step (-f follows it live)", Args: idArg("trace", "proctor traces")}, cmdTrace(stdout, stderr)),
		withFlags(&cobra.Command{Use: "traces", Short: "A job's attempts (default: your newest job's)", Args: noArgs}, cmdTraces(stdout, stderr)),
		withFlags(&cobra.Command{Use: "export JOB", Short: "Write a job's attempts as JSON Lines (or --format parquet, or --format harbor --out DIR: Harbor's job folders): conversations in OpenAI's chat format, rewards, evaluation, a training policy's tokens (progress on stderr)",
			Args: idArg("job", "proctor jobs")}, cmdExport(stdout, stderr)),
		withFlags(&cobra.Command{Use: "compare JOB_A JOB_B", Short: "Compare two jobs task by task: the difference, its 95% interval and p-value, and the tasks that flip",
			Args: jobPairArgs}, cmdCompare(stdout)),
		jobs, tasks, tasksets,
		withFlags(&cobra.Command{Use: "models", Short: "The models you can run", Args: noArgs}, cmdModels(stdout, stderr)),
		withFlags(&cobra.Command{Use: "workers", Short: "The live workers per task queue, and the sandboxes they run at once", Args: noArgs}, cmdWorkers(stdout, stderr)),
		env,
		withFlags(&cobra.Command{Use: "usage", Short: "Inference calls, environment time and cost per day", Args: noArgs}, cmdUsage(stdout, stderr)),
		withFlags(&cobra.Command{Use: "instances ENV", Short: "An environment's sandboxes; stop some with --stop", Args: exactArgs(1)}, cmdInstances(stdout, stderr)),
		withFlags(&cobra.Command{Use: "open [PAGE]", Short: "Print (and open) a one-time link that signs a browser in to the web app at PAGE (jobs/ID, traces/ID, …)",
			Args: cobra.MaximumNArgs(1)}, cmdOpen(stdout, stderr)),
	}
}
