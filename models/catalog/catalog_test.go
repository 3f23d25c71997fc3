package catalog_test

import (
	"errors"
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
