package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/registry"
)

// otherTeam creates a second team with a member and returns its caller and API key.
func otherTeam(t *testing.T, s *models.Store) (*models.Caller, string) {
	t.Helper()
	tm, err := s.CreateTeam(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	u, m, err := s.AddMember(ctx, tm.ID, "", "b@example.com", models.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := s.CreateAPIKey(ctx, m.ID, "b")
	if err != nil {
		t.Fatal(err)
	}
	return &models.Caller{TeamID: tm.ID, UserID: u.ID, MembershipID: m.ID}, key
}

func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.body)
	}
	return v
}

func TestRegistryRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, s, Options{Bucket: bucket, Blob: bucket.Handler()})
		env, err := registry.Of(s).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "todo", Description: "todo app"})
		if err != nil {
			t.Fatal(err)
		}
		if err := bucket.Put(ctx, "sources/todo.tar.gz", strings.NewReader("archive"), "application/gzip"); err != nil {
			t.Fatal(err)
		}
		build, err := registry.Of(s).CreateBuild(ctx, env.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true, SourceKey: "sources/todo.tar.gz",
			Lock:      models.BuildLock{Transport: models.TransportStdio, Tools: []models.LockTool{{Name: "add_todo"}}},
			Scenarios: []models.Scenario{{Name: "add-todos", Description: "add them"}}})
		if err != nil {
			t.Fatal(err)
		}
		bare, _ := registry.Of(s).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "bare"})
		b, bkey := otherTeam(t, s)
		theirs, _ := registry.Of(s).CreateRegistry(ctx, b, registry.NewRegistry{Name: "theirs"})

		page := decode[Page[Registry]](t, f.do("GET", "/v2/registry?sort_by=name&include_latest_scenarios=true", "key", nil))
		if page.Total != 2 || page.Items[0].Name != "bare" || len(page.Items[1].LatestScenarios) != 1 || !page.Items[1].CanEdit {
			t.Fatalf("list = %+v", page)
		}
		if r := f.do("GET", "/v2/registry?search=APP&match_templates=true", "key", nil); !strings.Contains(string(r.body), `"total":1`) {
			t.Errorf("match_templates search: %s", r.body)
		}
		wantEnvelope(t, f.do("GET", "/v2/registry", "", nil), 401, "unauthorized")
		wantValidation(t, f.do("GET", "/v2/registry?limit=501&project_id=nope&sort_by=tasks", "key", nil), "query.limit", "query.project_id", "query.sort_by")

		detail := decode[RegistryDetail](t, f.do("GET", "/v2/registry/"+env.ID.String(), "key", nil))
		if detail.LatestBuild == nil || detail.LatestBuild.ID != build.ID || detail.LatestBuild.Lock.Transport != "stdio" {
			t.Errorf("detail = %+v", detail)
		}
		wantValidation(t, f.do("GET", "/v2/registry/not-a-uuid", "key", nil), "path.registry_id")
		wantEnvelope(t, f.do("GET", "/v2/registry/"+uuid.NewString(), "key", nil), 404, "not_found")
		wantEnvelope(t, f.do("GET", "/v2/registry/"+theirs.ID.String(), "key", nil), 404, "not_found")
		if r := f.do("GET", "/v2/registry/"+env.ID.String(), "Bearer "+bkey, nil); r.status != 404 {
			t.Errorf("another team reads a private environment: %d", r.status)
		}

		scs := decode[[]Scenario](t, f.do("GET", "/v2/registry/"+env.ID.String()+"/scenarios", "key", nil))
		if len(scs) != 1 || scs[0].Slug != "add-todos" || scs[0].BuildID != build.ID {
			t.Errorf("scenarios = %+v", scs)
		}
		if r := f.do("GET", "/v2/registry/"+bare.ID.String()+"/scenarios", "key", nil); r.status != 200 || strings.TrimSpace(string(r.body)) != "[]" {
			t.Errorf("scenarios of an environment without builds = %d %s", r.status, r.body)
		}
		wantEnvelope(t, f.do("GET", "/v2/registry/"+bare.ID.String()+"/scenarios?build_id="+build.ID.String(), "key", nil), 404, "not_found")
		wantValidation(t, f.do("GET", "/v2/registry/"+env.ID.String()+"/scenarios?build_id=x", "key", nil), "query.build_id")

		src := decode[SourceURL](t, f.do("GET", "/v2/registry/"+env.ID.String()+"/source-url", "key", nil))
		if src.BuildID != build.ID || !strings.HasPrefix(src.DownloadURL, "http://files.test/blob/sources/todo.tar.gz?") || !strings.Contains(src.DownloadURL, "sig=") {
			t.Errorf("source url = %+v", src)
		}
		// The link works without credentials until it expires.
		res, err := http.Get(f.srv.URL + strings.TrimPrefix(src.DownloadURL, "http://files.test"))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("downloading through the signed URL = %d", res.StatusCode)
		}
		wantEnvelope(t, f.do("GET", "/v2/registry/"+bare.ID.String()+"/source-url", "key", nil), 404, "not_found")
	})
}

func TestTasksetAndUploadRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		env, _ := registry.Of(s).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "todo"})
		registry.Of(s).CreateBuild(ctx, env.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true, Scenarios: []models.Scenario{{Name: "add-todos"}}})

		body := `{"taskset_name": "demo", "tasks": [
			{"name": "milk", "env": "todo", "scenario": "add-todos", "args": {"items": ["milk"]},
			 "validation": [{"name": "add_todo", "arguments": {"title": "milk"}}],
			 "agent_config": {"allowed_tools": ["add_*"], "temperature": 0.2},
			 "runtime_config": {"limits": {"run_timeout_s": 60}, "resources": {"cpu": 1, "memory_mb": 512}}},
			{"name": "hello", "env": {"id": "` + env.ID.String() + `"}, "prompt": "Say hi", "external_id": "h-1"}
		]}`
		r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(body))
		if r.status != 201 {
			t.Fatalf("upload = %d %s", r.status, r.body)
		}
		res := decode[UploadResult](t, r)
		if res.TasksCreated != 2 || res.TaskCount != 2 || len(res.TaskVersionIDs) != 2 || res.TasksetName != "demo" {
			t.Fatalf("upload result = %+v", res)
		}
		again := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "session", strings.NewReader(body)))
		if again.TasksCreated != 0 || again.TasksUpdated != 0 || again.TaskVersionIDs[1] != res.TaskVersionIDs[1] {
			t.Errorf("unchanged re-upload = %+v", again)
		}

		ts := decode[Taskset](t, f.do("GET", "/v2/tasksets/"+res.TasksetID.String(), "key", nil))
		if ts.TaskCount != 2 || !ts.IsOwner {
			t.Errorf("taskset = %+v", ts)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasksets/"+res.TasksetID.String(), "", nil), 404, "not_found")
		wantValidation(t, f.do("GET", "/v2/tasksets/123", "key", nil), "path.taskset_id")

		exp := f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/export", "key", nil)
		export := decode[TasksetExport](t, exp)
		if len(export.Tasks) != 2 || export.Tasks[1].Env != "todo" || export.Tasks[1].Validation[0].Name != "add_todo" ||
			export.Tasks[1].RuntimeConfig.Limits == nil || *export.Tasks[1].RuntimeConfig.Limits.RunTimeoutS != 60.0 {
			t.Errorf("export = %s", exp.body)
		}
		// Every task carries env and scenario, as the spec's export shape has them: empty for a
		// prompt-only task.
		if !strings.Contains(string(exp.body), `"name":"hello","external_id":"h-1","env":"todo","scenario":""`) {
			t.Errorf("the prompt-only task's export lacks env and scenario: %s", exp.body)
		}
		// The agent config comes back typed, with the keys it does not name kept.
		if ac := export.Tasks[1].AgentConfig; len(ac.AllowedTools) != 1 || ac.AllowedTools[0] != "add_*" || ac.Extra["temperature"] != 0.2 {
			t.Errorf("exported agent_config = %+v", ac)
		}
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "bad", "tasks": [
			{"name": "a", "prompt": "p", "agent_config": {"allowed_tools": ["[a-"]}}]}`)), "body.tasks[0].agent_config.allowed_tools[0]")
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "bad", "tasks": [
			{"name": "a", "prompt": "p", "agent_config": {"allowed_tools": "add_*"}}]}`)), "body.tasks[0].agent_config.allowed_tools")
		wantEnvelope(t, f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/export", "session", nil), 401, "unauthorized")
		byName := decode[TasksetExport](t, f.do("GET", "/v2/tasksets/by-name/demo", "key", nil))
		if byName.TasksetID != res.TasksetID {
			t.Errorf("by-name = %+v", byName)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasksets/by-name/nope", "key", nil), 404, "not_found")

		// The export body uploads as is.
		var roundTrip map[string]any
		json.Unmarshal(exp.body, &roundTrip)
		roundTrip["taskset_name"] = "demo-copy"
		delete(roundTrip, "taskset_id")
		rt, _ := json.Marshal(roundTrip)
		if r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(string(rt))); r.status != 201 || !strings.Contains(string(r.body), `"tasks_created":2`) {
			t.Errorf("uploading an export = %d %s", r.status, r.body)
		}

		// Bad input: the schema's bounds, then the store's checks, each with its location.
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"x","tasks":[]}`)), "body.tasks")
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"x","tasks":[{"name":""}]}`)), "body.tasks[0].name")
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"x","tasks":[{"name":"a","prompt":"p","runtime_config":{"resources":{"memory_mb":"lots"}}}]}`)),
			"body.tasks[0].runtime_config.resources.memory_mb")
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"x","tasks":[{"name":"a","env":"nowhere","scenario":"s"},{"name":"b","env":"todo","scenario":"fly"}]}`)),
			"body.tasks[0].env", "body.tasks[1].scenario")
		wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"tasks":[{"name":"a","prompt":"p"}]}`)), "body.taskset_name")
		wantEnvelope(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":`)), 400, "bad_request")
		wantEnvelope(t, f.do("POST", "/v2/tasks/upload", "", strings.NewReader(body)), 401, "unauthorized")

		// Tenancy: another team cannot see the taskset (404) and cannot write a read-only share (403).
		b, bkey := otherTeam(t, s)
		one := fmt.Sprintf(`{"taskset_id": %q, "tasks": [{"name": "x", "prompt": "p"}]}`, res.TasksetID)
		wantEnvelope(t, f.do("POST", "/v2/tasks/upload", "Bearer "+bkey, strings.NewReader(one)), 404, "not_found")
		catalog.Of(s).ShareTaskset(ctx, res.TasksetID, b.TeamID, false)
		wantEnvelope(t, f.do("POST", "/v2/tasks/upload", "Bearer "+bkey, strings.NewReader(one)), 403, "forbidden")
		if r := f.do("GET", "/v2/tasksets/"+res.TasksetID.String(), "Bearer "+bkey, nil); r.status != 200 || !strings.Contains(string(r.body), `"can_edit":false`) {
			t.Errorf("a shared taskset for the other team = %d %s", r.status, r.body)
		}
	})
}

func TestUploadBodyLimit(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{MaxBodyBytes: 1024})
	big := `{"taskset_name":"x","tasks":[{"name":"a","prompt":"` + strings.Repeat("p", 2048) + `"}]}`
	wantEnvelope(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(big)), 413, "payload_too_large")
}
