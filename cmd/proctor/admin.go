package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

const adminUsage = `Usage: proctor admin <resource> <action> [flags]

Manages identity in the configured database (--database-url / PROCTOR_DATABASE_URL; without one,
the dev instance's SQLite file under --data-dir).

  team create --name NAME                                   create a team
  team list                                                 list teams
  member add --team ID --email EMAIL [--name N] [--role owner|member]
                                                            add a member (creates the user)
  member list --team ID                                     list a team's members
  member remove --team ID --membership N                    remove a member; their keys and sessions end
  key create --membership N [--name NAME]                   create an API key (shown once)
  key list --team ID                                        list a team's keys (prefixes only)
  key revoke --team ID --id KEY_ID                          revoke a key
  session create --membership N [--ttl 24h]                 create a browser session; prints the cookie value
  session revoke (--id SESSION_ID | --membership N | --team ID)
                                                            end one session, a member's, or a whole team's
  project create --team ID --name NAME [--description D]    create a project
  project list --team ID                                    list a team's projects
  model add --name MODEL --adapter openai|anthropic|oracle [--base-url URL] [--api-key-env VAR] [--provider P] [--team ID]
            [--input-cost-per-token USD] [--output-cost-per-token USD] [--trainable]
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

// adminAction runs one resource-action pair of `proctor admin`. Every action takes the same
// flags (those it does not use are ignored, and its help lists only its own: see adminFlags) and
// the shared configuration's; each is one of adminDBActions, or one of the two that need no
// database (keys create, temporal setup).
func adminAction(what string, stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		a := &adminRun{cfg: &config.Config{}, stdout: stdout}
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
	store  *models.Store
	tw     *tabwriter.Writer

	name, email, role, teamID, keyID, description, tasksetID, reqJSON string
	adapter, baseURL, keyEnv, provider                                string
	membership                                                        int64
	ttl, retention                                                    time.Duration
	trainable                                                         bool
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
	fs.StringVar(&a.adapter, "adapter", "", "model adapter: openai, anthropic or oracle")
	fs.StringVar(&a.baseURL, "base-url", "", "model server base URL (OpenAI-compatible: …/v1/)")
	fs.StringVar(&a.keyEnv, "api-key-env", "", "environment variable holding the model's API key on the workers")
	fs.BoolVar(&a.trainable, "trainable", false, "the model can be forked (POST /v2/models/fork) and its forks take checkpoints")
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

func (a *adminRun) temporalSetup(ctx context.Context) error {
	if a.cfg.TemporalAddress == "" || a.cfg.TemporalNamespace == "" {
		return errors.New("--temporal-address and --temporal-namespace are required (or PROCTOR_TEMPORAL_ADDRESS and PROCTOR_TEMPORAL_NAMESPACE)")
	}
	if a.retention < 24*time.Hour {
		return errors.New("--retention must be at least 24h (Temporal's minimum)")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	created, has, err := ptemporal.EnsureNamespace(sctx, a.cfg.TemporalAddress, a.cfg.TemporalNamespace, a.retention)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(a.stdout, "created namespace %s on %s (history kept %s)\n", a.cfg.TemporalNamespace, a.cfg.TemporalAddress, has)
	} else {
		fmt.Fprintf(a.stdout, "namespace %s exists on %s (history kept %s)\n", a.cfg.TemporalNamespace, a.cfg.TemporalAddress, has)
	}
	return nil
}

func (a *adminRun) keysCreate() error {
	if a.cfg.SecretsKeyFile == "" {
		return errors.New("--secrets-key-file is required: where to write the new keyset")
	}
	k, err := secrets.Create(a.cfg.SecretsKeyFile)
	if err != nil {
		return fmt.Errorf("create %s: %w", a.cfg.SecretsKeyFile, err)
	}
	fmt.Fprintf(a.stdout, "created %s (primary key %d); give it to every server and worker as PROCTOR_SECRETS_KEY_FILE, and keep a copy: without it no stored secret can be read\n", a.cfg.SecretsKeyFile, k.Primary())
	return nil
}

// team is the --team flag's team, which must exist.
func (a *adminRun) team(ctx context.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(a.teamID)
	if err != nil {
		return uuid.Nil, fmt.Errorf("--team must be a team id (uuid): %w", err)
	}
	if _, err := a.store.GetTeam(ctx, id); err != nil {
		return uuid.Nil, err
	}
	return id, nil
}

func (a *adminRun) needMembership() error {
	if a.membership <= 0 {
		return errors.New("--membership is required (see `proctor admin member list`)")
	}
	return nil
}

func (a *adminRun) teamCreate(ctx context.Context) error {
	t, err := a.store.CreateTeam(ctx, a.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "team\t%s\nname\t%s\n", t.ID, t.Name)
	return nil
}

func (a *adminRun) teamList(ctx context.Context) error {
	teams, err := a.store.ListTeams(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tNAME\tCREATED")
	for _, t := range teams {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339))
	}
	return nil
}

func (a *adminRun) memberAdd(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	u, m, err := a.store.AddMember(ctx, tid, a.name, a.email, a.role)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "membership\t%d\nuser\t%s\nemail\t%s\nrole\t%s\n", m.ID, u.ID, u.Email, m.Role)
	return nil
}

func (a *adminRun) memberList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	ms, users, err := a.store.ListMembers(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "MEMBERSHIP\tUSER\tEMAIL\tNAME\tROLE")
	for i, m := range ms {
		fmt.Fprintf(a.tw, "%d\t%s\t%s\t%s\t%s\n", m.ID, users[i].ID, users[i].Email, users[i].Name, m.Role)
	}
	return nil
}

func (a *adminRun) memberRemove(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	if err := a.needMembership(); err != nil {
		return err
	}
	if err := a.store.RemoveMember(ctx, tid, a.membership); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "removed membership", a.membership)
	return nil
}

func (a *adminRun) keyCreate(ctx context.Context) error {
	if err := a.needMembership(); err != nil {
		return err
	}
	k, token, err := a.store.CreateAPIKey(ctx, a.membership, a.name)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "id\t%s\nprefix\t%s\nkey\t%s\n", k.ID, k.Prefix, token)
	fmt.Fprintln(a.tw, "\nThe key is shown once; store it now.")
	return nil
}

func (a *adminRun) keyList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	keys, err := a.store.ListAPIKeys(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tPREFIX\tNAME\tMEMBERSHIP\tCREATED\tLAST USED\tREVOKED")
	for _, k := range keys {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.MembershipID,
			k.CreatedAt.Format(time.RFC3339), fmtTime(k.LastUsedAt), fmtTime(k.RevokedAt))
	}
	return nil
}

func (a *adminRun) keyRevoke(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	id, err := uuid.Parse(a.keyID)
	if err != nil {
		return fmt.Errorf("--id must be a key id (uuid): %w", err)
	}
	if err := a.store.RevokeAPIKey(ctx, tid, id); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "revoked", id)
	return nil
}

func (a *adminRun) sessionCreate(ctx context.Context) error {
	if err := a.needMembership(); err != nil {
		return err
	}
	sess, token, err := a.store.CreateSession(ctx, a.membership, nil, a.ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "session\t%s\nexpires\t%s\ncookie\t%s=%s\n", sess.ID, sess.ExpiresAt.Format(time.RFC3339), "proctor_session", token)
	return nil
}

func (a *adminRun) sessionRevoke(ctx context.Context) error {
	var sel models.SessionSelector
	switch {
	case a.keyID != "":
		id, err := uuid.Parse(a.keyID)
		if err != nil {
			return fmt.Errorf("--id must be a session id (uuid): %w", err)
		}
		sel.ID = id
	case a.membership > 0:
		sel.MembershipID = a.membership
	case a.teamID != "":
		tid, err := a.team(ctx)
		if err != nil {
			return err
		}
		sel.TeamID = tid
	default:
		return errors.New("give --id, --membership or --team")
	}
	n, err := a.store.RevokeSessions(ctx, sel)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "revoked\t%d sessions\n", n)
	return nil
}

func (a *adminRun) projectCreate(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	p, err := a.store.CreateProject(ctx, tid, a.name, a.description)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "project\t%s\nname\t%s\n", p.ID, p.Name)
	return nil
}

func (a *adminRun) projectList(ctx context.Context) error {
	tid, err := a.team(ctx)
	if err != nil {
		return err
	}
	ps, err := a.store.ListProjects(ctx, tid)
	if err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "ID\tNAME\tDESCRIPTION")
	for _, p := range ps {
		fmt.Fprintf(a.tw, "%s\t%s\t%s\n", p.ID, p.Name, p.Description)
	}
	return nil
}

func (a *adminRun) modelAdd(ctx context.Context) error {
	switch a.adapter {
	case models.AdapterOpenAI, models.AdapterAnthropic, models.AdapterOracle:
	default:
		return fmt.Errorf("--adapter must be openai, anthropic or oracle, not %q", a.adapter)
	}
	if a.name == "" {
		return errors.New("--name is required: the model_name clients resolve")
	}
	// Members' own keys (BYOK) go to the provider the model names: a model served from
	// elsewhere (a --base-url) is "custom" unless --provider says whose API it is.
	prov := a.provider
	if prov == "" {
		prov = a.adapter
		if a.baseURL != "" {
			prov = "custom"
		}
	}
	if a.inCost < 0 || a.outCost < 0 {
		return errors.New("--input-cost-per-token and --output-cost-per-token must not be negative")
	}
	m := &models.LLMModel{ModelName: a.name, Name: a.name, Provider: prov, Adapter: a.adapter, BaseURL: a.baseURL, APIKeyEnv: a.keyEnv,
		InputCostPerToken: a.inCost, OutputCostPerToken: a.outCost, Trainable: a.trainable}
	if a.teamID != "" {
		tid, err := a.team(ctx)
		if err != nil {
			return err
		}
		m.TeamID = &tid
	}
	if err := a.store.UpsertModel(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "model\t%s\nname\t%s\n", m.ID, m.ModelName)
	return nil
}

func (a *adminRun) keysRewrap(ctx context.Context) error {
	keys, err := openSecrets(a.cfg, false, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	if keys == nil {
		return errors.New("--secrets-key-file or --secrets-kms-uri is required: the key to re-wrap with")
	}
	n, err := a.store.RewrapSecrets(ctx, keys.Rewrap)
	if err != nil {
		return fmt.Errorf("re-wrapping stopped after %d values (run it again): %w", n, err)
	}
	fmt.Fprintf(a.stdout, "re-wrapped %d stored secrets\n", n)
	return nil
}

func (a *adminRun) keysRotate(ctx context.Context) error {
	if a.cfg.SecretsKMSURI != "" {
		return errors.New("a Cloud KMS key is rotated in KMS (gcloud kms keys versions create …, or a rotation schedule); then run `proctor admin keys rewrap`")
	}
	if a.cfg.SecretsKeyFile == "" {
		return errors.New("--secrets-key-file (PROCTOR_SECRETS_KEY_FILE) is required: the keyset to rotate")
	}
	id, err := secrets.Rotate(a.cfg.SecretsKeyFile)
	if err != nil {
		return err
	}
	k, err := secrets.Load(a.cfg.SecretsKeyFile)
	if err != nil {
		return err
	}
	n, err := a.store.RewrapSecrets(ctx, k.Rewrap)
	if err != nil {
		return fmt.Errorf("the key rotated to %d, but re-wrapping stopped (run `keys rotate` again, or re-wrap later: old keys still open old values): %w", id, err)
	}
	fmt.Fprintf(a.stdout, "new primary key %d; re-wrapped %d stored secrets with it\n", id, n)
	return nil
}

func (a *adminRun) tasksetRequirements(ctx context.Context) error {
	id, err := uuid.Parse(a.tasksetID)
	if err != nil {
		return fmt.Errorf("--taskset must be a taskset id (uuid): %w", err)
	}
	var req *models.Requirements
	dec := json.NewDecoder(strings.NewReader(a.reqJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := a.store.SetTasksetRequirements(ctx, id, req); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "requirements set for", id)
	return nil
}

// adminActions are the resource-action pairs of `proctor admin`, in the order help lists them.
var adminActions = []struct{ resource, action, short string }{
	{"team", "create", "create a team (--name)"},
	{"team", "list", "list teams"},
	{"member", "add", "add a member, creating the user (--team, --email [--name] [--role owner|member])"},
	{"member", "list", "list a team's members (--team)"},
	{"member", "remove", "remove a member; their keys and sessions end (--team, --membership)"},
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

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}
