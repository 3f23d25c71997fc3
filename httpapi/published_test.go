package httpapi

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A published job of a private taskset shows its own attempts and what they reference: anonymous
// callers and other teams see the task it ran, never the taskset's other tasks nor the comments
// on its tasks; the owning team sees the whole taskset.
func TestAPublishedJobShowsOnlyTheTasksItRan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key",
			strings.NewReader(`{"taskset_name":"private","tasks":[{"name":"ran","prompt":"p"},{"name":"secret-unrun","prompt":"q"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
			t.Fatal(err)
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "one task", TasksetID: &up.TasksetID, MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		var ranID, unrunID uuid.UUID
		for i, id := range []*uuid.UUID{&ranID, &unrunID} {
			if err := s.DB.NewSelect().Table("task_versions").Column("task_id").Where("id = ?", up.TaskVersionIDs[i]).Scan(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := catalog.Of(s).AddComment(ctx, f.caller, ranID, "the grader is too lenient here"); err != nil {
			t.Fatal(err)
		}
		jid := "/v2/jobs/" + job.ID.String()
		if r := f.do("POST", jid+"/publish", "key", nil); r.status != 200 {
			t.Fatalf("publish = %d %s", r.status, r.body)
		}
		_, otherKey := otherTeam(t, s)

		type coverage struct {
			TasksetID   uuid.UUID      `json:"taskset_id"`
			TasksetName string         `json:"taskset_name"`
			TotalTasks  int            `json:"total_tasks"`
			Tasks       []CoverageTask `json:"tasks"`
		}
		for _, tc := range []struct {
			caller, auth string
			wantTasks    []string
			wantComments int
		}{
			{"anonymous", "", []string{"ran"}, 0},
			{"another team", "Bearer " + otherKey, []string{"ran"}, 0},
			{"the owning team", "key", []string{"ran", "secret-unrun"}, 1},
		} {
			r := f.do("GET", jid+"/taskset-coverage", tc.auth, nil)
			cov := decode[coverage](t, r)
			var names []string
			for _, task := range cov.Tasks {
				names = append(names, task.TaskName)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantTasks, ",") || cov.TotalTasks != len(tc.wantTasks) || cov.TasksetID != up.TasksetID {
				t.Errorf("%s: coverage lists %v of %d tasks in %s, want %v", tc.caller, names, cov.TotalTasks, cov.TasksetID, tc.wantTasks)
			}
			if tc.auth != "key" && (strings.Contains(string(r.body), "secret-unrun") || strings.Contains(string(r.body), unrunID.String())) {
				t.Errorf("%s: coverage names a task the job never ran: %s", tc.caller, r.body)
			}
			thumbs := decode[struct {
				Thumbnails []Thumbnail `json:"thumbnails"`
			}](t, f.do("GET", jid+"/thumbnails", tc.auth, nil))
			if len(thumbs.Thumbnails) != 1 || thumbs.Thumbnails[0].CommentCount != tc.wantComments {
				t.Errorf("%s: thumbnails = %+v, want one with %d comments", tc.caller, thumbs.Thumbnails, tc.wantComments)
			}
		}
	})
}
