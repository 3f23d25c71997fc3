package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/registry"
)

// todoEnv creates an environment with a latest build that declares one scenario.
func todoEnv(t *testing.T, s *models.Store, c *models.Caller, name string, public bool) (*models.Registry, *models.Build) {
	t.Helper()
	r, err := registry.Of(s).CreateRegistry(ctx, c, registry.NewRegistry{Name: name, Description: "A todo list app", Public: public})
	if err != nil {
		t.Fatal(err)
	}
	b, err := registry.Of(s).CreateBuild(ctx, r.ID, registry.NewBuild{
		Status: registry.BuildSucceeded, SetLatest: true,
		Scenarios: []models.Scenario{{
			Name: "add-todos", Description: "Add the given todos", SetupDescription: "clears the list",
			ArgsSchema: map[string]any{"type": "object", "properties": map[string]any{"items": map[string]any{"type": "array"}}},
			Arguments:  []any{map[string]any{"name": "items", "required": true}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

func TestRegistriesAndScenarios(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		proj, _ := s.CreateProject(ctx, a.TeamID, "vision", "")
		todo, build := todoEnv(t, s, a, "todo", false)
		if _, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "todo"}); !errors.Is(err, models.ErrConflict) {
			t.Errorf("duplicate environment name: %v, want ErrConflict", err)
		}
		maze, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "maze", ProjectID: &proj.ID, Description: "grid world"})
		if err != nil {
			t.Fatal(err)
		}
		public, _ := todoEnv(t, s, b, "shared-todo", true)
		registry.Of(s).CreateRegistry(ctx, b, registry.NewRegistry{Name: "secret"})
		registry.Of(s).StarRegistry(ctx, a, maze.ID)

		b2, err := registry.Of(s).CreateBuild(ctx, todo.ID, registry.NewBuild{Status: registry.BuildFailed})
		if err != nil || b2.Version != 2 || build.Version != 1 {
			t.Fatalf("build versions %d then %v (%v), want 1 then 2", build.Version, b2, err)
		}

		names := func(q registry.RegistryQuery) []string {
			t.Helper()
			q.Limit = 50
			rows, total, err := registry.Of(s).ListRegistries(ctx, a, q)
			if err != nil {
				t.Fatal(err)
			}
			if total != len(rows) {
				t.Errorf("total %d for %d rows", total, len(rows))
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.Name)
			}
			return out
		}
		for _, tc := range []struct {
			q    registry.RegistryQuery
			want []string
		}{
			{registry.RegistryQuery{SortBy: models.SortName}, []string{"maze", "shared-todo", "todo"}},
			{registry.RegistryQuery{SortBy: models.SortStarred}, []string{"maze", "shared-todo", "todo"}},
			{registry.RegistryQuery{SortBy: models.SortName, OwnerOnly: true}, []string{"maze", "todo"}},
			{registry.RegistryQuery{SortBy: models.SortName, PublicOnly: true, OwnerOnly: true}, []string{"shared-todo"}},
			{registry.RegistryQuery{SortBy: models.SortName, ProjectID: &proj.ID}, []string{"maze"}},
			{registry.RegistryQuery{SortBy: models.SortName, Search: "TODO"}, []string{"shared-todo", "todo"}},
			{registry.RegistryQuery{SortBy: models.SortName, Search: "grid"}, nil},
			{registry.RegistryQuery{SortBy: models.SortName, Search: "grid", MatchTemplates: true}, []string{"maze"}},
			{registry.RegistryQuery{SortBy: models.SortName, Search: "clears the", MatchTemplates: true}, []string{"shared-todo", "todo"}},
		} {
			if got := names(tc.q); !equal(got, tc.want) {
				t.Errorf("%+v: got %v, want %v", tc.q, got, tc.want)
			}
		}

		rows, _, err := registry.Of(s).ListRegistries(ctx, a, registry.RegistryQuery{SortBy: models.SortName, IncludeLatestScenarios: true, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows[0].LatestScenarios) != 0 || len(rows[2].LatestScenarios) != 1 || rows[2].LatestScenarios[0].Slug != "add-todos" {
			t.Errorf("embedded scenarios: maze %v, todo %v", rows[0].LatestScenarios, rows[2].LatestScenarios)
		}
		if rows[1].CanEdit || !rows[2].CanEdit || !rows[0].IsStarred || rows[0].StarCount != 1 {
			t.Errorf("flags: %+v", rows)
		}

		got, err := registry.Of(s).GetRegistry(ctx, a, todo.ID)
		if err != nil || got.LatestBuild == nil || got.LatestBuild.ID != build.ID {
			t.Fatalf("GetRegistry = %+v, %v; want the latest build %s (the failed build 2 was not made latest)", got, err, build.ID)
		}
		if _, err := registry.Of(s).GetRegistry(ctx, b, todo.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's private environment: %v, want ErrNotFound", err)
		}
		if _, err := registry.Of(s).GetRegistry(ctx, nil, public.ID); err != nil {
			t.Errorf("a public environment anonymously: %v", err)
		}
		if r, err := registry.Of(s).FindRegistry(ctx, a, "todo"); err != nil || r.ID != todo.ID {
			t.Errorf("FindRegistry by name = %v, %v", r, err)
		}
		if r, err := registry.Of(s).FindRegistry(ctx, a, todo.ID.String()); err != nil || r.ID != todo.ID {
			t.Errorf("FindRegistry by id = %v, %v", r, err)
		}
		if _, err := registry.Of(s).FindRegistry(ctx, a, "secret"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("FindRegistry of an invisible environment: %v", err)
		}
		scs, err := registry.Of(s).ListScenarios(ctx, build.ID)
		if err != nil || len(scs) != 1 || scs[0].ArgsSchema["type"] != "object" || len(scs[0].Arguments) != 1 {
			t.Errorf("ListScenarios = %+v, %v", scs, err)
		}
		if _, err := registry.Of(s).GetBuild(ctx, maze.ID, build.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a build through another environment: %v", err)
		}
	})
}

func TestUploadVersionsTasksAndExportRoundTrips(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		todo, _ := todoEnv(t, s, a, "todo", false)
		first := catalog.Upload{TasksetName: "demo", Description: "demo tasks", Tasks: []catalog.TaskUpload{
			{ExternalID: "ext-1", TaskContent: models.TaskContent{
				Name: "add-milk", Env: "todo", Scenario: "add-todos", Args: map[string]any{"items": []any{"milk"}},
				Validation: []models.ValidationCall{{Name: "add_todo", Arguments: map[string]any{"title": "milk"}}},
			}},
			{TaskContent: models.TaskContent{Name: "free-form", Prompt: "Say hi", SystemPrompt: "Be brief"}},
		}}
		res, err := catalog.Of(s).UploadTasks(ctx, a, first)
		if err != nil {
			t.Fatal(err)
		}
		if !res.TasksetCreated || res.TasksCreated != 2 || res.TasksUpdated != 0 || len(res.TaskVersionIDs) != 2 || res.TaskCount != 2 {
			t.Fatalf("first upload = %+v", res)
		}
		v, err := catalog.Of(s).GetTaskVersion(ctx, a, res.TaskVersionIDs[0])
		if err != nil || v.RegistryID == nil || *v.RegistryID != todo.ID || v.ScenarioID == nil || v.Version != 1 {
			t.Fatalf("version = %+v, %v; want resolved to the todo environment and its scenario", v, err)
		}

		again, err := catalog.Of(s).UploadTasks(ctx, a, first)
		if err != nil || again.TasksetCreated || again.TasksCreated != 0 || again.TasksUpdated != 0 || again.TaskVersionIDs[0] != res.TaskVersionIDs[0] {
			t.Fatalf("unchanged re-upload = %+v, %v; want the same versions and no change", again, err)
		}

		changed := first
		changed.Tasks = append([]catalog.TaskUpload(nil), first.Tasks...)
		changed.Tasks[0].Args = map[string]any{"items": []any{"milk", "eggs"}}
		changed.Tasks[0].Name = "add-milk-and-eggs" // matched by external_id: a rename, not a new task
		upd, err := catalog.Of(s).UploadTasks(ctx, a, changed)
		if err != nil || upd.TasksUpdated != 1 || upd.TasksCreated != 0 || upd.TaskVersionIDs[0] == res.TaskVersionIDs[0] || upd.TaskVersionIDs[1] != res.TaskVersionIDs[1] {
			t.Fatalf("changed upload = %+v, %v", upd, err)
		}
		if old, err := catalog.Of(s).GetTaskVersion(ctx, a, res.TaskVersionIDs[0]); err != nil || old.Args["items"].([]any)[0] != "milk" || len(old.Args["items"].([]any)) != 1 {
			t.Errorf("the old version changed: %+v, %v", old, err)
		}
		row, err := catalog.Of(s).GetTaskset(ctx, a, res.TasksetID)
		if err != nil || row.TaskCount != 2 || row.Description != "demo tasks" {
			t.Fatalf("taskset after rename = %+v, %v; want 2 tasks", row, err)
		}

		exported, err := catalog.Of(s).ExportTaskset(ctx, a, row)
		if err != nil || len(exported) != 2 || exported[0].Name != "add-milk-and-eggs" || exported[0].Env != "todo" || exported[0].ExternalID != "ext-1" || exported[1].SystemPrompt != "Be brief" {
			t.Fatalf("export = %+v, %v", exported, err)
		}
		// The export shape uploads as is: into the same taskset it changes nothing; into a new one it
		// recreates the same content.
		back := catalog.Upload{TasksetID: &res.TasksetID}
		for _, e := range exported {
			back.Tasks = append(back.Tasks, catalog.TaskUpload{ExternalID: e.ExternalID, TaskContent: e.TaskContent})
		}
		if r, err := catalog.Of(s).UploadTasks(ctx, a, back); err != nil || r.TasksCreated+r.TasksUpdated != 0 {
			t.Errorf("export uploaded back = %+v, %v; want no change", r, err)
		}
		back.TasksetID, back.TasksetName = nil, "demo-copy"
		if r, err := catalog.Of(s).UploadTasks(ctx, a, back); err != nil || r.TasksCreated != 2 || !r.TasksetCreated {
			t.Errorf("export uploaded as a new taskset = %+v, %v", r, err)
		}
		byName, err := catalog.Of(s).GetTasksetByName(ctx, a, "demo-copy")
		if err != nil || byName.TaskCount != 2 {
			t.Errorf("GetTasksetByName = %+v, %v", byName, err)
		}

		// Every invalid field is reported at once, with its location, before anything is written.
		_, err = catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "bad", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "", Prompt: "x"}},
			{TaskContent: models.TaskContent{Name: "dup", Prompt: "x"}},
			{TaskContent: models.TaskContent{Name: "dup", Prompt: "x"}},
			{TaskContent: models.TaskContent{Name: "no-env", Env: "nowhere", Scenario: "s"}},
			{TaskContent: models.TaskContent{Name: "no-scenario", Env: "todo", Scenario: "fly"}},
			{TaskContent: models.TaskContent{Name: "no-prompt"}},
			{TaskContent: models.TaskContent{Name: "bad-validation", Prompt: "x", Validation: []models.ValidationCall{{Arguments: map[string]any{"x": 1}}},
				AgentConfig: models.AgentConfig{AllowedTools: []string{"todo_*", "[a-"}}}},
			{TaskID: "not-a-uuid", TaskContent: models.TaskContent{Name: "bad-id", Prompt: "x"}},
		}})
		var verr models.ValidationError
		if !errors.As(err, &verr) {
			t.Fatalf("invalid upload: %v, want a ValidationError", err)
		}
		want := []string{"tasks[0].name", "tasks[2].name", "tasks[3].env", "tasks[4].scenario", "tasks[5].prompt",
			"tasks[6].validation[0].name", "tasks[6].agent_config.allowed_tools[1]", "tasks[7].task_id"}
		var got []string
		for _, e := range verr {
			got = append(got, e.Location)
		}
		if !equal(got, want) {
			t.Errorf("invalid upload locations = %v, want %v", got, want)
		}
		if _, err := catalog.Of(s).GetTasksetByName(ctx, a, "bad"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("an invalid upload created its taskset: %v", err)
		}
		if _, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetID: &res.TasksetID, Tasks: []catalog.TaskUpload{{TaskID: uuid.NewString(), TaskContent: models.TaskContent{Name: "x", Prompt: "x"}}}}); !errors.As(err, &verr) {
			t.Errorf("an unknown task_id: %v, want a ValidationError", err)
		}
	})
}

func TestUploadRespectsTenancy(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		priv, _ := catalog.Of(s).CreateTaskset(ctx, a, "private", "", false)
		pub, _ := catalog.Of(s).CreateTaskset(ctx, a, "public", "", true)
		readOnly, _ := catalog.Of(s).CreateTaskset(ctx, a, "read-only", "", false)
		writable, _ := catalog.Of(s).CreateTaskset(ctx, a, "writable", "", false)
		catalog.Of(s).ShareTaskset(ctx, readOnly.ID, b.TeamID, false)
		catalog.Of(s).ShareTaskset(ctx, writable.ID, b.TeamID, true)
		task := []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "t", Prompt: "p"}}}
		for _, tc := range []struct {
			id   uuid.UUID
			want error
		}{
			{priv.ID, models.ErrNotFound},
			{pub.ID, models.ErrForbidden},
			{readOnly.ID, models.ErrForbidden},
			{writable.ID, nil},
		} {
			id := tc.id
			_, err := catalog.Of(s).UploadTasks(ctx, b, catalog.Upload{TasksetID: &id, Tasks: task})
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Errorf("upload by another team into %s: %v, want %v", id, err, tc.want)
			}
		}
		if _, err := catalog.Of(s).GetTaskset(ctx, nil, pub.ID); err != nil {
			t.Errorf("a public taskset anonymously: %v", err)
		}
		if _, err := catalog.Of(s).GetTaskset(ctx, nil, priv.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a private taskset anonymously: %v", err)
		}
		if _, err := catalog.Of(s).GetTasksetByName(ctx, b, "writable"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("by-name reaches only the caller's own team: %v", err)
		}
	})
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestUploadRefusesArgsTheScenarioCannotTake: a task's args are checked against its scenario's
// args_schema at upload, and a task that names a scenario names the environment that declares it;
// each mistake is reported at the task's index and the JSON path of the value, before any write.
func TestUploadRefusesArgsTheScenarioCannotTake(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		r, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "lists"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := registry.Of(s).CreateBuild(ctx, r.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true, Scenarios: []models.Scenario{{
			Name: "add-todos", ArgsSchema: map[string]any{"type": "object", "required": []any{"items"},
				"properties": map[string]any{"items": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
		}}}); err != nil {
			t.Fatal(err)
		}
		task := func(name string, args map[string]any, env string) catalog.TaskUpload {
			return catalog.TaskUpload{TaskContent: models.TaskContent{Name: name, Env: env, Scenario: "add-todos", Args: args}}
		}
		for _, tt := range []struct {
			name  string
			task  catalog.TaskUpload
			where string
		}{
			{"a string for a list", task("a", map[string]any{"items": "milk"}, "lists"), "tasks[1].args.items"},
			{"a number in a list of strings", task("b", map[string]any{"items": []any{"milk", 3}}, "lists"), "tasks[1].args.items[1]"},
			{"a required argument left out", task("c", map[string]any{}, "lists"), "tasks[1].args"},
			{"a scenario without its environment", task("d", map[string]any{"items": []any{"milk"}}, ""), "tasks[1].env"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "checked", Tasks: []catalog.TaskUpload{
					task("fine", map[string]any{"items": []any{"milk"}}, "lists"), tt.task}})
				var verr models.ValidationError
				if !errors.As(err, &verr) || len(verr) != 1 || verr[0].Location != tt.where {
					t.Fatalf("upload = %v, want one error at %s", err, tt.where)
				}
				if _, err := catalog.Of(s).GetTasksetByName(ctx, a, "checked"); !errors.Is(err, models.ErrNotFound) {
					t.Errorf("a refused upload wrote its taskset: %v", err)
				}
			})
		}
		if _, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "checked", Tasks: []catalog.TaskUpload{
			task("fine", map[string]any{"items": []any{"milk", "eggs"}}, "lists")}}); err != nil {
			t.Errorf("args that match the schema: %v", err)
		}
	})
}

// TestTaskKeywordsAndMetadata: a task's keywords and metadata (a Proctor extension) are part of
// its version's content: kept, exported, a change makes a new version and the same again makes
// none; the listing searches the name, the latest version's description and its keywords, in SQL,
// with a total that counts what matched.
func TestTaskKeywordsAndMetadata(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		harbor := map[string]any{"harbor": map[string]any{"source": "terminal-bench", "metadata": map[string]any{"difficulty": "easy"}}}
		up := catalog.Upload{TasksetName: "tb", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "hello-world", Description: "Create a file with a greeting", Prompt: "p",
				Keywords: []string{"files", " Warm-Up ", "FILES"}, Metadata: harbor}},
			{TaskContent: models.TaskContent{Name: "log-census", Description: "Count things in logs", Prompt: "p", Keywords: []string{"shell", "grep"}}},
			{TaskContent: models.TaskContent{Name: "plain", Description: "half price: 50%_off", Prompt: "p"}},
		}}
		res, err := catalog.Of(s).UploadTasks(ctx, a, up)
		if err != nil {
			t.Fatal(err)
		}
		v, err := catalog.Of(s).GetTaskVersion(ctx, a, res.TaskVersionIDs[0])
		if err != nil {
			t.Fatal(err)
		}
		if !equal(v.Keywords, []string{"files", "Warm-Up"}) {
			t.Errorf("stored keywords %q, want [files Warm-Up]: trimmed, a repeat in another case kept once", v.Keywords)
		}
		if md, _ := v.Metadata["harbor"].(map[string]any); md == nil || md["source"] != "terminal-bench" {
			t.Errorf("stored metadata %v, want the upload's", v.Metadata)
		}
		if plain, err := catalog.Of(s).GetTaskVersion(ctx, a, res.TaskVersionIDs[2]); err != nil || plain.Keywords == nil || len(plain.Keywords) != 0 || plain.Metadata == nil || len(plain.Metadata) != 0 {
			t.Errorf("a task without keywords or metadata = %+v, %v; want empty ones, not null", plain, err)
		}

		if again, err := catalog.Of(s).UploadTasks(ctx, a, up); err != nil || again.TasksCreated+again.TasksUpdated != 0 {
			t.Fatalf("unchanged re-upload = %+v, %v; want no new version", again, err)
		}
		// A change of keywords, or of metadata alone, is a change of content.
		changed := up
		changed.Tasks = append([]catalog.TaskUpload(nil), up.Tasks...)
		changed.Tasks[0].Metadata = map[string]any{"harbor": map[string]any{"source": "terminal-bench", "metadata": map[string]any{"difficulty": "hard"}}}
		changed.Tasks[1].Keywords = []string{"shell"}
		upd, err := catalog.Of(s).UploadTasks(ctx, a, changed)
		if err != nil || upd.TasksUpdated != 2 || upd.TaskVersionIDs[0] == res.TaskVersionIDs[0] || upd.TaskVersionIDs[1] == res.TaskVersionIDs[1] || upd.TaskVersionIDs[2] != res.TaskVersionIDs[2] {
			t.Fatalf("upload with new metadata and keywords = %+v, %v; want new versions of the first two tasks only", upd, err)
		}

		list := func(q catalog.TaskQuery) ([]string, int) {
			t.Helper()
			if q.Limit == 0 {
				q.Limit = 50
			}
			rows, total, err := catalog.Of(s).ListTasks(ctx, a, res.TasksetID, q)
			if err != nil {
				t.Fatalf("%+v: %v", q, err)
			}
			names := []string{}
			for _, r := range rows {
				names = append(names, r.Name)
			}
			return names, total
		}
		for _, tc := range []struct {
			q     catalog.TaskQuery
			want  []string
			total int
		}{
			{catalog.TaskQuery{}, []string{"hello-world", "log-census", "plain"}, 3},
			{catalog.TaskQuery{Search: "CENSUS"}, []string{"log-census"}, 1},     // the name
			{catalog.TaskQuery{Search: "greeting"}, []string{"hello-world"}, 1},  // the description
			{catalog.TaskQuery{Search: "warm"}, []string{"hello-world"}, 1},      // a keyword, in part
			{catalog.TaskQuery{Search: "0%_"}, []string{"plain"}, 1},             // % and _ are themselves
			{catalog.TaskQuery{Search: "%"}, []string{"plain"}, 1},               // not "anything"
			{catalog.TaskQuery{Search: "grep"}, []string{}, 0},                   // the latest version's keywords only
			{catalog.TaskQuery{Keyword: " WARM-UP"}, []string{"hello-world"}, 1}, // whole, ignoring case and spaces around
			{catalog.TaskQuery{Keyword: "warm"}, []string{}, 0},                  // not in part
			{catalog.TaskQuery{Keyword: "shell"}, []string{"log-census"}, 1},     // the latest version's
			{catalog.TaskQuery{Search: "l", Keyword: "files"}, []string{"hello-world"}, 1},
			{catalog.TaskQuery{Search: "l", Limit: 1, Offset: 1}, []string{"log-census"}, 3}, // total is the filter's, not the page's
		} {
			got, total := list(tc.q)
			if !equal(got, tc.want) || total != tc.total {
				t.Errorf("%+v: %v (total %d), want %v (total %d)", tc.q, got, total, tc.want, tc.total)
			}
		}
		rows, _, err := catalog.Of(s).ListTasks(ctx, a, res.TasksetID, catalog.TaskQuery{Limit: 50})
		if err != nil || len(rows) != 3 || !equal(rows[0].Keywords, []string{"files", "Warm-Up"}) || !equal(rows[1].Keywords, []string{"shell"}) || len(rows[2].Keywords) != 0 {
			t.Errorf("listed keywords = %+v, %v; want each task's latest version's", rows, err)
		}

		// The export carries them, and uploads back as no change.
		ts, err := catalog.Of(s).GetTaskset(ctx, a, res.TasksetID)
		if err != nil {
			t.Fatal(err)
		}
		exported, err := catalog.Of(s).ExportTaskset(ctx, a, ts)
		if err != nil || len(exported) != 3 {
			t.Fatalf("export = %+v, %v", exported, err)
		}
		harborOf, _ := exported[0].Metadata["harbor"].(map[string]any)
		if tb, _ := harborOf["metadata"].(map[string]any); !equal(exported[0].Keywords, []string{"files", "Warm-Up"}) || tb["difficulty"] != "hard" {
			t.Errorf("exported keywords %q and metadata %v, want the latest version's", exported[0].Keywords, exported[0].Metadata)
		}
		back := catalog.Upload{TasksetID: &res.TasksetID}
		for _, e := range exported {
			back.Tasks = append(back.Tasks, catalog.TaskUpload{ExternalID: e.ExternalID, TaskContent: e.TaskContent})
		}
		if r, err := catalog.Of(s).UploadTasks(ctx, a, back); err != nil || r.TasksCreated+r.TasksUpdated != 0 {
			t.Errorf("export uploaded back = %+v, %v; want no change", r, err)
		}

		// A blank keyword and metadata over 64 KiB are refused, at their places, before any write.
		_, err = catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "refused", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "blank", Prompt: "p", Keywords: []string{"ok", "  "}}},
			{TaskContent: models.TaskContent{Name: "bulky", Prompt: "p", Metadata: map[string]any{"notes": strings.Repeat("x", catalog.MaxTaskMetadataBytes)}}},
		}})
		var verr models.ValidationError
		if !errors.As(err, &verr) || len(verr) != 2 || verr[0].Location != "tasks[0].keywords[1]" || verr[1].Location != "tasks[1].metadata" ||
			!strings.Contains(verr[1].Message, `"bulky"`) {
			t.Fatalf("blank keyword and bulky metadata: %v, want errors at tasks[0].keywords[1] and tasks[1].metadata naming the task", err)
		}
		if _, err := catalog.Of(s).GetTasksetByName(ctx, a, "refused"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("a refused upload wrote its taskset: %v", err)
		}
	})
}
