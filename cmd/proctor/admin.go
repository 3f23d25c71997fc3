package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/models"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const adminUsage = `Usage: proctor admin <resource> <action> [flags]

Manages identity in the configured database (--database-url / PROCTOR_DATABASE_URL; without one,
the dev instance's SQLite file under --data-dir).

  team create --name NAME                                   create a team
  team list                                                 list teams
  member add --team ID --email EMAIL [--name N] [--role owner|member]
                                                            add a member (creates the user)
  member list --team ID                                     list a team's members
  member remove --team ID --membership N [--blob-url U]    remove a member: their keys, sessions, secrets and
                                                            member-scope files (bytes too) go; team files stay
  key create --membership N [--name NAME]                   create an API key (shown once)
  key list --team ID                                        list a team's keys (prefixes only)
  key revoke --team ID --id KEY_ID                          revoke a key
  session create --membership N [--ttl 24h]                 create a browser session; prints the cookie value
  session revoke (--id SESSION_ID | --membership N | --team ID)
                                                            end one session, a member's, or a whole team's
  project create --team ID --name NAME [--description D]    create a project
  project list --team ID                                    list a team's projects
  model add --name MODEL --adapter openai|anthropic|oracle|idle|random|tamper|replay [--base-url URL] [--api-key-env VAR] [--provider P] [--team ID]
            [--input-cost-per-token USD] [--output-cost-per-token USD] [--trainable] [--training-policy]
                                                            register a model (e.g. a vLLM, Ollama or llama.cpp server);
                                                            the key is read on the workers from VAR, never stored;
                                                            members' own keys for --provider (default: the
                                                            adapter, or custom with --base-url) are used instead
  keys create --secrets-key-file F                          create the key-encryption keyset that seals secrets (mode 0600)
  keys rotate [--secrets-key-file F]                        add a new primary key (old values still open) and
                                                            re-wrap every stored secret with it
  keys rewrap [--secrets-key-file F | --secrets-kms-uri U]  re-wrap every stored secret with the current key
                                                            (after rotating a Cloud KMS key)
  temporal setup [--temporal-address H:P] [--temporal-namespace NS] [--retention 720h]
                                                            create the Temporal namespace (with its history retention)
                                                            if the cluster lacks it; run once per deployment
  taskset requirements --taskset ID --json '{"min_traces":3,"min_accuracy":0.2,"max_accuracy":0.9,"models":["oracle"]}'
                                                            set a taskset's submission requirements ('null' clears them);
                                                            QA checks: "qa_checks":[{"kind":"reference_solves"},
                                                            {"kind":"stage_passed","stage":"<one of its stages>"}]
`

// adminCommand is `proctor admin RESOURCE ACTION [flags]`.
func adminCommand(stdout, stderr io.Writer) *cobra.Command {
	admin := group(&cobra.Command{Use: "admin", Short: "Manage teams, members, API keys, sessions, projects, models and secrets keys in the configured database",
		Long: adminUsage})
	resources := map[string]*cobra.Command{}
	for _, a := range adminActions {
		r := resources[a.resource]
		if r == nil {
			r = group(&cobra.Command{Use: a.resource, Short: "proctor admin " + a.resource + " …"})
			resources[a.resource] = r
			admin.AddCommand(r)
		}
		cmd := withFlags(&cobra.Command{Use: a.action, Short: a.short}, adminAction(a.resource+" "+a.action, stdout, stderr))
		// Every action parses the same flags, but its help lists only those it reads: the ones
		// its description names, and where it finds the store, the keys or Temporal.
		uses := adminFlags(a.resource+" "+a.action, a.short)
		cmd.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = !uses[f.Name] })
		r.AddCommand(cmd)
	}
	return admin
}

// adminFlags are the flags an admin action reads.
func adminFlags(what, short string) map[string]bool {
	uses := map[string]bool{"help": true}
	for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(short, -1) {
		uses[m[1]] = true
	}
	more := map[string]string{
		"model add":      "base-url api-key-env provider trainable training-policy input-cost-per-token output-cost-per-token",
		"keys rotate":    "secrets-key-file secrets-kms-uri",
		"keys rewrap":    "secrets-key-file secrets-kms-uri",
		"temporal setup": "temporal-address temporal-namespace",
		"keys create":    "",
	}[what]
	for _, f := range strings.Fields(more) {
		uses[f] = true
	}
	if what != "temporal setup" {
		uses["data-dir"] = true // the dev defaults: the store, and where keys create writes
	}
	if what != "temporal setup" && what != "keys create" {
		uses["database-url"] = true
	}
	return uses
}

// adminAction runs one resource-action pair of `proctor admin`. Every action takes the same
// flags (those it does not use are ignored, and its help lists only its own: see adminFlags) and
// the shared configuration's; each is one of adminDBActions, or one of the two that need no
// database (keys create, temporal setup).
func adminAction(what string, stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		a := &adminRun{cfg: &config.Config{}, stdout: stdout, stderr: stderr}
		a.bind(fs)
		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return fmt.Errorf("proctor admin %s takes no arguments (got %q): its values are flags", what, pos[0])
			}
			switch what {
			case "temporal setup":
				return a.temporalSetup(ctx)
			case "keys create":
				if a.cfg.DatabaseURL == "" {
					if err := a.cfg.FillDevDefaults(); err != nil {
						return err
					}
				}
				return a.keysCreate()
			}
			act, ok := adminDBActions[what]
			if !ok {
				return usagef("unknown admin command %q", what)
			}
			if a.cfg.DatabaseURL == "" {
				if err := a.cfg.FillDevDefaults(); err != nil {
					return err
				}
			}
			store, err := models.Open(ctx, a.cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer store.Close()
			if _, err := store.Migrate(ctx); err != nil {
				return err
			}
			a.store, a.tw = store, tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			defer a.tw.Flush()
			return act(a, ctx)
		}
	}
}

// adminRun is one `proctor admin` action: its flags, and the store and table writer the
// database actions use.
type adminRun struct {
	cfg    *config.Config
	stdout io.Writer
	// stderr takes warnings: what was done stands, but may not work as meant.
	stderr io.Writer
	store  *models.Store
	tw     *tabwriter.Writer

	name, email, role, teamID, keyID, description, tasksetID, reqJSON string
	adapter, baseURL, keyEnv, provider                                string
	membership                                                        int64
	ttl, retention                                                    time.Duration
	trainable, trainingPolicy                                         bool
	inCost, outCost                                                   float64
}

func (a *adminRun) bind(fs *flag.FlagSet) {
	a.cfg.Bind(fs)
	fs.StringVar(&a.name, "name", "", "name")
	fs.StringVar(&a.email, "email", "", "member email")
	fs.StringVar(&a.role, "role", models.RoleMember, "member role: owner or member")
	fs.StringVar(&a.teamID, "team", "", "team id")
	fs.Int64Var(&a.membership, "membership", 0, "membership id (an integer)")
	fs.StringVar(&a.keyID, "id", "", "API key id (key revoke) or session id (session revoke)")
	fs.DurationVar(&a.ttl, "ttl", 24*time.Hour, "session lifetime")
	fs.StringVar(&a.description, "description", "", "description")
	fs.StringVar(&a.tasksetID, "taskset", "", "taskset id")
	fs.StringVar(&a.reqJSON, "json", "", "submission requirements as JSON")
	fs.StringVar(&a.adapter, "adapter", "", "model adapter: openai, anthropic, oracle, idle, random, tamper or replay (the built-in agents certification and replay checks run)")
	fs.StringVar(&a.baseURL, "base-url", "", "model server base URL (OpenAI-compatible: …/v1/)")
	fs.StringVar(&a.keyEnv, "api-key-env", "", "environment variable holding the model's API key on the workers")
	fs.BoolVar(&a.trainable, "trainable", false, "the model can be forked (POST /v2/models/fork) and its forks take checkpoints")
	fs.BoolVar(&a.trainingPolicy, "training-policy", false, "a policy being trained (an OpenAI-compatible server such as vLLM): each call asks for token ids and logprobs, kept for export")
	fs.Float64Var(&a.inCost, "input-cost-per-token", 0, "USD per prompt token, for the inference log's cost")
	fs.Float64Var(&a.outCost, "output-cost-per-token", 0, "USD per completion token")
	fs.StringVar(&a.provider, "provider", "", "whose API the model is (openai, anthropic, …): members' own keys for that provider are used for it; default the adapter, or custom with --base-url")
	fs.DurationVar(&a.retention, "retention", 30*24*time.Hour, "how long Temporal keeps a finished workflow's history (temporal setup)")
}

// adminDBActions are the actions over the database, by "resource action".
var adminDBActions = map[string]func(*adminRun, context.Context) error{
	"team create":          (*adminRun).teamCreate,
	"team list":            (*adminRun).teamList,
	"member add":           (*adminRun).memberAdd,
	"member list":          (*adminRun).memberList,
	"member remove":        (*adminRun).memberRemove,
	"key create":           (*adminRun).keyCreate,
	"key list":             (*adminRun).keyList,
	"key revoke":           (*adminRun).keyRevoke,
	"session create":       (*adminRun).sessionCreate,
	"session revoke":       (*adminRun).sessionRevoke,
	"project create":       (*adminRun).projectCreate,
	"project list":         (*adminRun).projectList,
	"model add":            (*adminRun).modelAdd,
	"keys rewrap":          (*adminRun).keysRewrap,
	"keys rotate":          (*adminRun).keysRotate,
	"taskset requirements": (*adminRun).tasksetRequirements,
}

// adminActions are the resource-action pairs of `proctor admin`, in the order help lists them.
var adminActions = []struct{ resource, action, short string }{
	{"team", "create", "create a team (--name)"},
	{"team", "list", "list teams"},
	{"member", "add", "add a member, creating the user (--team, --email [--name] [--role owner|member])"},
	{"member", "list", "list a team's members (--team)"},
	{"member", "remove", "remove a member: their keys, sessions, secrets and own files go, team files stay (--team, --membership, --blob-url)"},
	{"key", "create", "create an API key, shown once (--membership [--name])"},
	{"key", "list", "list a team's keys, prefixes only (--team)"},
	{"key", "revoke", "revoke a key (--team, --id)"},
	{"session", "create", "create a browser session and print the cookie value (--membership [--ttl 24h])"},
	{"session", "revoke", "end one session, a member's, or a whole team's (--id | --membership | --team)"},
	{"project", "create", "create a project (--team, --name [--description])"},
	{"project", "list", "list a team's projects (--team)"},
	{"model", "add", "register a model, e.g. a vLLM, Ollama or llama.cpp server (--name, --adapter …)"},
	{"keys", "create", "create the key-encryption keyset that seals secrets (--secrets-key-file)"},
	{"keys", "rotate", "add a new primary key and re-wrap every stored secret with it"},
	{"keys", "rewrap", "re-wrap every stored secret with the current key (after rotating a Cloud KMS key)"},
	{"temporal", "setup", "create the Temporal namespace with its history retention, if missing (--retention 720h)"},
	{"taskset", "requirements", "set a taskset's submission requirements (--taskset, --json; 'null' clears them)"},
}
