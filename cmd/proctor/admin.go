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
                                                            set a taskset's submission requirements ('null' clears them)
`

// adminAction runs one resource-action pair of `proctor admin`. Every action takes the same
// flags (those it does not use are ignored) and the shared configuration's.
func adminAction(what string, stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		cfg := &config.Config{}
		cfg.Bind(fs)
		name := fs.String("name", "", "name")
		email := fs.String("email", "", "member email")
		role := fs.String("role", models.RoleMember, "member role: owner or member")
		teamID := fs.String("team", "", "team id")
		membership := fs.Int64("membership", 0, "membership id (an integer)")
		keyID := fs.String("id", "", "API key id (key revoke) or session id (session revoke)")
		ttl := fs.Duration("ttl", 24*time.Hour, "session lifetime")
		description := fs.String("description", "", "description")
		tasksetID := fs.String("taskset", "", "taskset id")
		reqJSON := fs.String("json", "", "submission requirements as JSON")
		adapter := fs.String("adapter", "", "model adapter: openai, anthropic or oracle")
		baseURL := fs.String("base-url", "", "model server base URL (OpenAI-compatible: …/v1/)")
		keyEnv := fs.String("api-key-env", "", "environment variable holding the model's API key on the workers")
		trainable := fs.Bool("trainable", false, "the model can be forked (POST /v2/models/fork) and its forks take checkpoints")
		inCost := fs.Float64("input-cost-per-token", 0, "USD per prompt token, for the inference log's cost")
		outCost := fs.Float64("output-cost-per-token", 0, "USD per completion token")
		provider := fs.String("provider", "", "whose API the model is (openai, anthropic, …): members' own keys for that provider are used for it; default the adapter, or custom with --base-url")
		retention := fs.Duration("retention", 30*24*time.Hour, "how long Temporal keeps a finished workflow's history (temporal setup)")
		return func(ctx context.Context, pos []string) error {
			if len(pos) > 0 {
				return fmt.Errorf("proctor admin %s takes no arguments (got %q): its values are flags", what, pos[0])
			}
			if what == "temporal setup" {
				if cfg.TemporalAddress == "" || cfg.TemporalNamespace == "" {
					return errors.New("--temporal-address and --temporal-namespace are required (or PROCTOR_TEMPORAL_ADDRESS and PROCTOR_TEMPORAL_NAMESPACE)")
				}
				if *retention < 24*time.Hour {
					return errors.New("--retention must be at least 24h (Temporal's minimum)")
				}
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				created, has, err := ptemporal.EnsureNamespace(sctx, cfg.TemporalAddress, cfg.TemporalNamespace, *retention)
				if err != nil {
					return err
				}
				if created {
					fmt.Fprintf(stdout, "created namespace %s on %s (history kept %s)\n", cfg.TemporalNamespace, cfg.TemporalAddress, has)
				} else {
					fmt.Fprintf(stdout, "namespace %s exists on %s (history kept %s)\n", cfg.TemporalNamespace, cfg.TemporalAddress, has)
				}
				return nil
			}
			if cfg.DatabaseURL == "" {
				if err := cfg.FillDevDefaults(); err != nil {
					return err
				}
			}
			if what == "keys create" {
				if cfg.SecretsKeyFile == "" {
					return errors.New("--secrets-key-file is required: where to write the new keyset")
				}
				k, err := secrets.Create(cfg.SecretsKeyFile)
				if err != nil {
					return fmt.Errorf("create %s: %w", cfg.SecretsKeyFile, err)
				}
				fmt.Fprintf(stdout, "created %s (primary key %d); give it to every server and worker as PROCTOR_SECRETS_KEY_FILE, and keep a copy: without it no stored secret can be read\n", cfg.SecretsKeyFile, k.Primary())
				return nil
			}
			store, err := models.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer store.Close()
			if _, err := store.Migrate(ctx); err != nil {
				return err
			}
			team := func() (uuid.UUID, error) {
				id, err := uuid.Parse(*teamID)
				if err != nil {
					return uuid.Nil, fmt.Errorf("--team must be a team id (uuid): %w", err)
				}
				if _, err := store.GetTeam(ctx, id); err != nil {
					return uuid.Nil, err
				}
				return id, nil
			}
			needMembership := func() error {
				if *membership <= 0 {
					return errors.New("--membership is required (see `proctor admin member list`)")
				}
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			defer tw.Flush()

			switch what {
			case "team create":
				t, err := store.CreateTeam(ctx, *name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "team\t%s\nname\t%s\n", t.ID, t.Name)
			case "team list":
				teams, err := store.ListTeams(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintln(tw, "ID\tNAME\tCREATED")
				for _, t := range teams {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339))
				}
			case "member add":
				tid, err := team()
				if err != nil {
					return err
				}
				u, m, err := store.AddMember(ctx, tid, *name, *email, *role)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "membership\t%d\nuser\t%s\nemail\t%s\nrole\t%s\n", m.ID, u.ID, u.Email, m.Role)
			case "member list":
				tid, err := team()
				if err != nil {
					return err
				}
				ms, users, err := store.ListMembers(ctx, tid)
				if err != nil {
					return err
				}
				fmt.Fprintln(tw, "MEMBERSHIP\tUSER\tEMAIL\tNAME\tROLE")
				for i, m := range ms {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.ID, users[i].ID, users[i].Email, users[i].Name, m.Role)
				}
			case "key create":
				if err := needMembership(); err != nil {
					return err
				}
				k, token, err := store.CreateAPIKey(ctx, *membership, *name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "id\t%s\nprefix\t%s\nkey\t%s\n", k.ID, k.Prefix, token)
				fmt.Fprintln(tw, "\nThe key is shown once; store it now.")
			case "key list":
				tid, err := team()
				if err != nil {
					return err
				}
				keys, err := store.ListAPIKeys(ctx, tid)
				if err != nil {
					return err
				}
				fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tMEMBERSHIP\tCREATED\tLAST USED\tREVOKED")
				for _, k := range keys {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", k.ID, k.Prefix, k.Name, k.MembershipID,
						k.CreatedAt.Format(time.RFC3339), fmtTime(k.LastUsedAt), fmtTime(k.RevokedAt))
				}
			case "key revoke":
				tid, err := team()
				if err != nil {
					return err
				}
				id, err := uuid.Parse(*keyID)
				if err != nil {
					return fmt.Errorf("--id must be a key id (uuid): %w", err)
				}
				if err := store.RevokeAPIKey(ctx, tid, id); err != nil {
					return err
				}
				fmt.Fprintln(tw, "revoked", id)
			case "session create":
				if err := needMembership(); err != nil {
					return err
				}
				sess, token, err := store.CreateSession(ctx, *membership, nil, *ttl)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "session\t%s\nexpires\t%s\ncookie\t%s=%s\n", sess.ID, sess.ExpiresAt.Format(time.RFC3339), "proctor_session", token)
			case "session revoke":
				var sel models.SessionSelector
				switch {
				case *keyID != "":
					id, err := uuid.Parse(*keyID)
					if err != nil {
						return fmt.Errorf("--id must be a session id (uuid): %w", err)
					}
					sel.ID = id
				case *membership > 0:
					sel.MembershipID = *membership
				case *teamID != "":
					tid, err := team()
					if err != nil {
						return err
					}
					sel.TeamID = tid
				default:
					return errors.New("give --id, --membership or --team")
				}
				n, err := store.RevokeSessions(ctx, sel)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "revoked	%d sessions\n", n)
			case "member remove":
				tid, err := team()
				if err != nil {
					return err
				}
				if err := needMembership(); err != nil {
					return err
				}
				if err := store.RemoveMember(ctx, tid, *membership); err != nil {
					return err
				}
				fmt.Fprintln(tw, "removed membership", *membership)
			case "project create":
				tid, err := team()
				if err != nil {
					return err
				}
				p, err := store.CreateProject(ctx, tid, *name, *description)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "project\t%s\nname\t%s\n", p.ID, p.Name)
			case "project list":
				tid, err := team()
				if err != nil {
					return err
				}
				ps, err := store.ListProjects(ctx, tid)
				if err != nil {
					return err
				}
				fmt.Fprintln(tw, "ID\tNAME\tDESCRIPTION")
				for _, p := range ps {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", p.ID, p.Name, p.Description)
				}
			case "model add":
				switch *adapter {
				case models.AdapterOpenAI, models.AdapterAnthropic, models.AdapterOracle:
				default:
					return fmt.Errorf("--adapter must be openai, anthropic or oracle, not %q", *adapter)
				}
				if *name == "" {
					return errors.New("--name is required: the model_name clients resolve")
				}
				// Members' own keys (BYOK) go to the provider the model names: a model served from
				// elsewhere (a --base-url) is "custom" unless --provider says whose API it is.
				prov := *provider
				if prov == "" {
					prov = *adapter
					if *baseURL != "" {
						prov = "custom"
					}
				}
				if *inCost < 0 || *outCost < 0 {
					return errors.New("--input-cost-per-token and --output-cost-per-token must not be negative")
				}
				m := &models.LLMModel{ModelName: *name, Name: *name, Provider: prov, Adapter: *adapter, BaseURL: *baseURL, APIKeyEnv: *keyEnv,
					InputCostPerToken: *inCost, OutputCostPerToken: *outCost, Trainable: *trainable}
				if *teamID != "" {
					tid, err := team()
					if err != nil {
						return err
					}
					m.TeamID = &tid
				}
				if err := store.UpsertModel(ctx, m); err != nil {
					return err
				}
				fmt.Fprintf(tw, "model\t%s\nname\t%s\n", m.ID, m.ModelName)
			case "keys rewrap":
				keys, err := openSecrets(cfg, false, slog.New(slog.DiscardHandler))
				if err != nil {
					return err
				}
				if keys == nil {
					return errors.New("--secrets-key-file or --secrets-kms-uri is required: the key to re-wrap with")
				}
				n, err := store.RewrapSecrets(ctx, keys.Rewrap)
				if err != nil {
					return fmt.Errorf("re-wrapping stopped after %d values (run it again): %w", n, err)
				}
				fmt.Fprintf(stdout, "re-wrapped %d stored secrets\n", n)
			case "keys rotate":
				if cfg.SecretsKMSURI != "" {
					return errors.New("a Cloud KMS key is rotated in KMS (gcloud kms keys versions create …, or a rotation schedule); then run `proctor admin keys rewrap`")
				}
				if cfg.SecretsKeyFile == "" {
					return errors.New("--secrets-key-file (PROCTOR_SECRETS_KEY_FILE) is required: the keyset to rotate")
				}
				id, err := secrets.Rotate(cfg.SecretsKeyFile)
				if err != nil {
					return err
				}
				k, err := secrets.Load(cfg.SecretsKeyFile)
				if err != nil {
					return err
				}
				n, err := store.RewrapSecrets(ctx, k.Rewrap)
				if err != nil {
					return fmt.Errorf("the key rotated to %d, but re-wrapping stopped (run `keys rotate` again, or re-wrap later: old keys still open old values): %w", id, err)
				}
				fmt.Fprintf(stdout, "new primary key %d; re-wrapped %d stored secrets with it\n", id, n)
			case "taskset requirements":
				id, err := uuid.Parse(*tasksetID)
				if err != nil {
					return fmt.Errorf("--taskset must be a taskset id (uuid): %w", err)
				}
				var req *models.Requirements
				dec := json.NewDecoder(strings.NewReader(*reqJSON))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&req); err != nil {
					return fmt.Errorf("--json: %w", err)
				}
				if err := store.SetTasksetRequirements(ctx, id, req); err != nil {
					return err
				}
				fmt.Fprintln(tw, "requirements set for", id)
			default:
				return usagef("unknown admin command %q", what)
			}
			return nil
		}
	}
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
