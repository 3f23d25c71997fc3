package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/proctorhq/proctor/internal/testenv"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

// probeSource is an environment that reports which variables its process has: a hash of each
// value, never the value, so a test can tell which of two values won.
const probeSource = `package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"

	"github.com/proctorhq/proctor/envserver"
)

type names struct {
	Names []string ` + "`json:\"names\"`" + `
}

type status struct {
	Seen map[string]string ` + "`json:\"seen\"`" + `
}

func main() {
	envserver.Main(func(logger *slog.Logger) (*envserver.Server, error) {
		srv := envserver.New("secret-probe", envserver.WithLogger(logger), envserver.WithRequiredEnv("PROBE_TOKEN", "PROBE_REGION"))
		if _, err := envserver.AddTool(srv, "env_status", "Which variables are set (a hash of each value)", func(ctx context.Context, in names) (status, error) {
			out := status{Seen: map[string]string{}}
			for _, n := range in.Names {
				v, ok := os.LookupEnv(n)
				if !ok {
					out.Seen[n] = "unset"
					continue
				}
				h := sha256.Sum256([]byte(v))
				out.Seen[n] = hex.EncodeToString(h[:8])
			}
			return out, nil
		}); err != nil {
			return nil, err
		}
		// A careless environment: it answers, and logs, the raw values.
		if _, err := envserver.AddTool(srv, "env_echo", "The variables' values, as they are", func(ctx context.Context, in names) (status, error) {
			out := status{Seen: map[string]string{}}
			for _, n := range in.Names {
				out.Seen[n] = os.Getenv(n)
				fmt.Fprintf(os.Stderr, "%s is %s\n", n, out.Seen[n])
			}
			return out, nil
		}); err != nil {
			return nil, err
		}
		evaluate := envserver.NewHub(envserver.EvaluateHub)
		if _, err := envserver.AddTool(evaluate, "done", "Always 1", func(ctx context.Context, _ names) (envserver.EvaluationResult, error) {
			return envserver.EvaluationResult{Reward: 1, Done: true}, nil
		}); err != nil {
			return nil, err
		}
		if err := srv.Mount(evaluate); err != nil {
			return nil, err
		}
		return srv, envserver.AddScenario(srv, envserver.Scenario[names]{Name: "probe", Prompt: "Report the variables.",
			Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "done"}})
	})
}
`

func hash8(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:8])
}

func TestSecretStores(t *testing.T) { eachStore(t, testSecretStores) }

// probePlatformKey is the platform's key of the model the secret stores' test registers, as
// $PROBE_PLATFORM_KEY (which TestMain sets).
const probePlatformKey = "sk-platform-key-9e9e9e"

// testSecretStores drives the three secret stores through the API: an attempt's environment
// gets the environment's variables over the launcher's secrets, tenancy holds, and no value
// appears in the database, the data dir (Temporal's histories included), the logs or any
// answer but the one that set it.
func testSecretStores(t *testing.T, storeArgs []string, dbURL string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, append([]string{"--build-goproxy", "off", "--log-level", "info",
		"--data-team-quota-bytes", "4096", "--data-max-file-bytes", "3072"}, storeArgs...)...)
	answers := &testenv.Buffer{}
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress, answers: answers}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	b := c.waitBuild(c.deploy(tarGz(t, outOfTreeModule(t, []byte(probeSource))), map[string]any{"name": "probe"})["id"].(string))
	if b["status"] != "succeeded" {
		t.Fatalf("probe build = %v", b)
	}
	registry := b["registry_id"].(string)
	values := map[string]string{"env": "env-token-5d1c", "member": "member-token-77a0", "region": "member-region-eu", "extra": "extra-value-31",
		"bound": "sk-bound-openai-2f9e4c", "byok": "sk-byok-personal-8c2d11", "byok2": "sk-byok-rotated-41aa07", "team": "sk-ant-team-c0ffee99",
		"byok3": "sk-byok-again-6b6b6b", "teamopenai": "sk-team-openai-0a0a0a", "platform": probePlatformKey}

	check := func() (missing []string, complete bool) {
		var res struct {
			Environments []struct {
				RequiredVars []string `json:"required_vars"`
				MissingVars  []string `json:"missing_vars"`
				IsComplete   bool     `json:"is_complete"`
			}
		}
		if code := c.call("POST", "/v2/env-vars/check", map[string]any{"registry_ids": []string{registry}}, &res); code != 200 || len(res.Environments) != 1 {
			t.Fatalf("check = %d %+v", code, res)
		}
		e := res.Environments[0]
		if !slices.Equal(e.RequiredVars, []string{"PROBE_REGION", "PROBE_TOKEN"}) {
			t.Errorf("required_vars = %q, want what the environment declared", e.RequiredVars)
		}
		return e.MissingVars, e.IsComplete
	}
	if missing, ok := check(); ok || len(missing) != 2 {
		t.Errorf("check before any variable: missing %q complete %v", missing, ok)
	}

	// One variable; the member's secrets, one of them bound to a provider.
	var v struct {
		ID, Name    string
		MaskedValue string `json:"masked_value"`
		Value       *string
	}
	if code := c.call("POST", "/v2/env-vars", map[string]any{"registry_id": registry, "name": "PROBE_TOKEN", "value": values["env"]}, &v); code != 201 || v.Value == nil || *v.Value != values["env"] || v.MaskedValue != "••••••••5d1c" {
		t.Fatalf("set env var = %d %+v", code, v)
	}
	var ms struct {
		ID       string
		Provider *string
	}
	for name, val := range map[string]string{"PROBE_TOKEN": values["member"], "PROBE_REGION": values["region"]} {
		if code := c.call("POST", "/v2/member-secrets", map[string]any{"name": name, "value": val}, &ms); code != 201 {
			t.Fatalf("set member secret %s = %d", name, code)
		}
	}
	if code := c.call("POST", "/v2/member-secrets", map[string]any{"name": "OPENAI_API_KEY", "value": values["bound"], "provider": "openai"}, &ms); code != 201 || ms.Provider == nil || *ms.Provider != "openai" {
		t.Fatalf("bind a member secret = %d %+v", code, ms)
	}
	boundID := ms.ID
	if code := c.call("POST", "/v2/member-secrets", map[string]any{"name": "SECOND_OPENAI", "value": "x", "provider": "openai"}, nil); code != 409 {
		t.Errorf("a second secret bound to openai = %d, want 409", code)
	}
	if missing, ok := check(); ok || !slices.Equal(missing, []string{"PROBE_REGION"}) {
		t.Errorf("check with PROBE_TOKEN set: missing %q complete %v (member secrets do not count)", missing, ok)
	}
	var batch struct{ Created, Updated, Deleted int }
	if code := c.call("PUT", "/v2/env-vars/batch", map[string]any{"registry_id": registry, "variables": []map[string]string{{"name": "PROBE_TOKEN", "value": values["env"]}, {"name": "PROBE_EXTRA", "value": values["extra"]}}}, &batch); code != 200 || batch.Created != 1 || batch.Updated != 1 || batch.Deleted != 0 {
		t.Errorf("batch = %d %+v", code, batch)
	}
	if code := c.call("PUT", "/v2/env-vars/batch", map[string]any{"registry_id": registry, "variables": []map[string]string{{"name": "A", "value": "1"}, {"name": "A", "value": "2"}}}, nil); code != 422 {
		t.Errorf("a batch naming a variable twice = %d, want 422", code)
	}
	var list struct {
		Variables []struct {
			Name        string
			MaskedValue string `json:"masked_value"`
			Value       *string
		}
	}
	c.call("GET", "/v2/env-vars?registry_id="+registry, nil, &list)
	if len(list.Variables) != 2 || list.Variables[0].Name != "PROBE_EXTRA" || list.Variables[1].Value != nil {
		t.Errorf("list = %+v", list)
	}

	// The attempt's environment: the variable wins over the member's secret of the same name; the
	// member's other secret is there; the provider-bound one is not.
	probeNames := []string{"PROBE_TOKEN", "PROBE_REGION", "PROBE_EXTRA", "OPENAI_API_KEY"}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "secrets", "tasks": []any{map[string]any{
		"name": "probe", "env": "probe", "scenario": "probe", "args": map[string]any{"names": probeNames},
		"validation": []any{map[string]any{"name": "env_status", "arguments": map[string]any{"names": probeNames}},
			map[string]any{"name": "env_echo", "arguments": map[string]any{"names": []string{"PROBE_REGION"}}}}}}}, &up)
	tr, _ := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": oracle})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
		t.Fatalf("the probe attempt = %+v", tr)
	}
	var events json.RawMessage
	c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &events)
	seen := map[string]string{}
	for _, m := range regexp.MustCompile(`\\"(PROBE_[A-Z]+|OPENAI_API_KEY)\\":\\"([0-9a-f]{16}|unset)\\"`).FindAllStringSubmatch(string(events), -1) {
		seen[m[1]] = m[2]
	}
	// The member's secret the environment echoed is redacted from its answer (and from its log:
	// the scan of the database below finds it nowhere).
	if !strings.Contains(string(events), `\"PROBE_REGION\":\"[redacted]\"`) {
		t.Errorf("the echoed member secret is not redacted in the events: %.2000s", events)
	}
	var envLogs json.RawMessage
	c.call("GET", "/v2/trace/"+tr.ID+"/env-logs?limit=1000", nil, &envLogs)
	if !strings.Contains(string(envLogs), "PROBE_REGION is [redacted]") {
		t.Errorf("the echoed member secret is not redacted in the environment's log:\n%s", envLogs)
	}
	want := map[string]string{"PROBE_TOKEN": hash8(values["env"]), "PROBE_REGION": hash8(values["region"]), "PROBE_EXTRA": hash8(values["extra"]), "OPENAI_API_KEY": "unset"}
	for name, w := range want {
		if seen[name] != w {
			t.Errorf("the sandbox's %s = %q, want %q (env var wins; provider-bound secrets stay out)", name, seen[name], w)
		}
	}

	// Temporal holds the attempt's history encrypted: read without the key (as the server
	// stores it), every payload is ciphertext; with the key it reads.
	raw, err := ptemporal.Dial(t.Context(), dev.info.TemporalAddress, "default", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	it := raw.GetWorkflowHistory(t.Context(), "rollout/"+tr.ID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	payloads := 0
	var sample *commonpb.Payload
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		var ps []*commonpb.Payload
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			ps = a.GetInput().GetPayloads()
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			ps = a.GetInput().GetPayloads()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
			ps = a.GetResult().GetPayloads()
		}
		for _, p := range ps {
			if sample == nil {
				sample = p
			}
			payloads++
			if enc := string(p.GetMetadata()["encoding"]); enc != "binary/proctor-encrypted" {
				t.Errorf("a %s payload of the history is %s, not encrypted", ev.GetEventType(), enc)
			}
		}
	}
	if payloads < 3 {
		t.Errorf("found %d payloads in the attempt's history", payloads)
	}

	// The Temporal UI decodes them through the API's codec, as a team owner, from its origin.
	var settings struct {
		Codec struct {
			Endpoint           string
			IncludeCredentials bool
		}
	}
	if code, body, _ := get(t, dev.info.TemporalUIURL+"/api/v1/settings", ""); code != 200 || json.Unmarshal([]byte(body), &settings) != nil ||
		settings.Codec.Endpoint != dev.info.APIURL+"/codec" || !settings.Codec.IncludeCredentials {
		t.Errorf("the UI's codec settings = %d %+v", code, settings.Codec)
	}
	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{sample}})
	decode := func(key, origin string) (int, string) {
		req, _ := http.NewRequest("POST", dev.info.APIURL+"/codec/decode", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, out := decode(c.key, dev.info.TemporalUIURL); code != 200 || !strings.Contains(out, `"json/plain"`) && !strings.Contains(out, "anNvbi9wbGFpbg==") {
		t.Errorf("the owner's decode = %d %.200s", code, out)
	}
	for what, want := range map[string]int{"no key": 401, "another origin": 403} {
		key, origin := c.key, "http://evil.example"
		if what == "no key" {
			key, origin = "", ""
		}
		if code, _ := decode(key, origin); code != want {
			t.Errorf("decode with %s = %d, want %d", what, code, want)
		}
	}

	// Tenancy: a second member of the team sees none of the first's secrets; another team sees
	// none of the environment's variables.
	storeFlag := []string{"--data-dir", dataDir}
	if dbURL != "" {
		storeFlag = []string{"--database-url", dbURL}
	}
	admin := func(args ...string) string {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), append(append([]string{"admin"}, args...), storeFlag...), &out, &errOut); err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	field := func(out, name string) string { return outputField(t, out, name) }
	teamID := regexp.MustCompile(`[0-9a-f-]{36}`).FindString(admin("team", "list"))
	mate := api{t: t, base: c.base, answers: answers, key: field(admin("key", "create", "--membership",
		field(admin("member", "add", "--team", teamID, "--email", "mate@example.com", "--role", "member"), "membership")), "key")}
	otherTeam := field(admin("team", "create", "--name", "other"), "team")
	stranger := api{t: t, base: c.base, answers: answers, key: field(admin("key", "create", "--membership",
		field(admin("member", "add", "--team", otherTeam, "--email", "x@example.com", "--role", "owner"), "membership")), "key")}
	checkDataFiles(t, c, mate, stranger)
	if code, _ := decode(mate.key, ""); code != 403 {
		t.Errorf("a member (not owner) decoding payloads = %d, want 403", code)
	}
	var mine struct{ Secrets []json.RawMessage }
	if code := mate.call("GET", "/v2/member-secrets", nil, &mine); code != 200 || len(mine.Secrets) != 0 {
		t.Errorf("a teammate lists %d of the member's secrets (%d)", len(mine.Secrets), code)
	}
	for method, code := range map[string]int{"PATCH": mate.call("PATCH", "/v2/member-secrets/"+boundID, map[string]any{"value": "stolen"}, nil),
		"DELETE": mate.call("DELETE", "/v2/member-secrets/"+boundID, nil, nil)} {
		if code != 404 {
			t.Errorf("a teammate's %s of the member's secret = %d, want 404", method, code)
		}
	}
	for what, code := range map[string]int{
		"list":   stranger.call("GET", "/v2/env-vars?registry_id="+registry, nil, nil),
		"set":    stranger.call("POST", "/v2/env-vars", map[string]any{"registry_id": registry, "name": "X", "value": "y"}, nil),
		"patch":  stranger.call("PATCH", "/v2/env-vars/"+v.ID, map[string]any{"value": "y"}, nil),
		"delete": stranger.call("DELETE", "/v2/env-vars/"+v.ID, nil, nil),
		"check":  stranger.call("POST", "/v2/env-vars/check", map[string]any{"registry_ids": []string{registry}}, nil),
	} {
		if code != 404 {
			t.Errorf("another team's %s of the environment's variables = %d, want 404", what, code)
		}
	}

	// Provider credentials: personal and team scopes, masked, rotated, deleted.
	var cred struct {
		ID, Scope, Provider string
		MaskedValue         string `json:"masked_value"`
	}
	if code := c.call("POST", "/v2/byok-credentials", map[string]any{"provider": "openai", "api_key": values["byok"], "name": "my openai"}, &cred); code != 201 || cred.Scope != "personal" || cred.MaskedValue != "••••••••2d11" {
		t.Fatalf("set a personal credential = %d %+v", code, cred)
	}
	personal := cred.ID
	if code := c.call("POST", "/v2/byok-credentials", map[string]any{"provider": "anthropic", "scope": "team", "api_key": values["team"]}, &cred); code != 201 || cred.Scope != "team" {
		t.Fatalf("set a team credential = %d %+v", code, cred)
	}
	if code := mate.call("POST", "/v2/byok-credentials", map[string]any{"provider": "openai", "scope": "team", "api_key": "x"}, nil); code != 403 {
		t.Errorf("a member (not owner) setting a team credential = %d, want 403", code)
	}
	var creds []struct{ ID, Scope string }
	mate.call("GET", "/v2/byok-credentials", nil, &creds)
	if len(creds) != 1 || creds[0].Scope != "team" {
		t.Errorf("a teammate lists %+v, want the team's credential only", creds)
	}
	if code := mate.call("PATCH", "/v2/byok-credentials/"+personal, map[string]any{"api_key": "x"}, nil); code != 404 {
		t.Errorf("a teammate rotating the member's credential = %d, want 404", code)
	}
	if code := c.call("PATCH", "/v2/byok-credentials/"+personal, map[string]any{"api_key": values["byok2"]}, &cred); code != 200 || cred.MaskedValue != "••••••••aa07" {
		t.Errorf("rotate = %d %+v", code, cred)
	}
	if code := c.call("DELETE", "/v2/byok-credentials/"+personal, nil, nil); code != 204 {
		t.Errorf("delete a credential = %d", code)
	}
	c.call("GET", "/v2/byok-credentials", nil, &creds)
	if len(creds) != 1 {
		t.Errorf("after the delete: %+v", creds)
	}

	// The model's calls use the launching member's own key, by precedence (personal credential,
	// bound secret, team credential), else the platform's; a teammate gets the team's, never
	// another member's.
	keys := &keyLog{}
	srv, _ := scriptedOpenAIKeys(t, []map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}, 0, keys)
	admin("model", "add", "--name", "byok-gpt", "--adapter", "openai", "--provider", "openai", "--base-url", srv.URL+"/v1/", "--api-key-env", "PROBE_PLATFORM_KEY")
	gpt := c.resolve("/v2/models/resolve?model=byok-gpt", "id")
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "byok", "tasks": []any{map[string]any{
		"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}}}}}, &up)
	task := up.TaskVersionIDs[0]
	usedKey := func(who api, step string) string {
		t.Helper()
		before := len(keys.distinct())
		keys.mu.Lock()
		keys.keys = nil
		keys.mu.Unlock()
		tr, logs := who.runToEnd(map[string]any{"task_version_id": task, "model_id": gpt})
		got := keys.distinct()
		if tr.Status != "completed" || len(got) != 1 {
			t.Fatalf("%s: attempt %+v, keys %q (before %d)", step, tr, got, before)
		}
		if strings.Contains(logs, got[0]) {
			t.Errorf("%s: the key is in the worker log", step)
		}
		return got[0]
	}
	if k := usedKey(c, "a bound secret"); k != values["bound"] {
		t.Errorf("with a bound secret the model used %q", k)
	}
	c.call("POST", "/v2/byok-credentials", map[string]any{"provider": "openai", "api_key": values["byok3"]}, &cred)
	personal = cred.ID
	if k := usedKey(c, "a personal credential"); k != values["byok3"] {
		t.Errorf("with a personal credential the model used %q", k)
	}
	c.call("POST", "/v2/byok-credentials", map[string]any{"provider": "openai", "scope": "team", "api_key": values["teamopenai"]}, &cred)
	teamCred := cred.ID
	if k := usedKey(mate, "a teammate"); k != values["teamopenai"] {
		t.Errorf("a teammate's attempt used %q, want the team's key", k)
	}
	c.call("DELETE", "/v2/byok-credentials/"+personal, nil, nil)
	if k := usedKey(c, "bound over team"); k != values["bound"] {
		t.Errorf("with a bound secret and a team credential the model used %q", k)
	}
	c.call("DELETE", "/v2/member-secrets/"+boundID, nil, nil)
	if k := usedKey(c, "the team's"); k != values["teamopenai"] {
		t.Errorf("with the team's credential only the model used %q", k)
	}
	c.call("GET", "/v2/byok-credentials", nil, &creds)
	var used []struct {
		ID         string
		LastUsedAt *string `json:"last_used_at"`
	}
	c.call("GET", "/v2/byok-credentials", nil, &used)
	for _, u := range used {
		if u.ID == teamCred && u.LastUsedAt == nil {
			t.Error("the team credential's last_used_at was not set")
		}
	}
	c.call("DELETE", "/v2/byok-credentials/"+teamCred, nil, nil)
	if k := usedKey(c, "the platform's"); k != values["platform"] {
		t.Errorf("without any own key the model used %q, want the platform's", k)
	}

	// No value appears anywhere but in the answer that set it.
	setters := regexp.MustCompile(`(?m)^POST /v2/(env-vars|member-secrets) 201 .*$`)
	rest := setters.ReplaceAllString(answers.String(), "")
	for what, val := range values {
		for where, text := range map[string]string{"an answer": rest, "dev's output": dev.out.String() + dev.errOut.String()} {
			if strings.Contains(text, val) {
				t.Errorf("the %s value appears in %s", what, where)
			}
		}
		scanDirFor(t, dataDir, val)
		if dbURL != "" {
			scanPostgresFor(t, dbURL, val)
		}
	}
}
