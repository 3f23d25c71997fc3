package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// launchQueries bounds the statements of a run_list of 10,000 attempts (a taskset of 100 tasks ×
// 2 models × group size 50), authentication and the spend check included: planning takes a
// fixed number of queries however many tasks the taskset holds (it paged the tasks 500 at a time
// before, three queries a page), and the traces are written in batches.
const launchQueries = 40

func TestLaunchingTenThousandAttemptsTakesFewQueries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{Workflows: launchRecorder{}})
		var tasks []string
		for i := range 100 {
			tasks = append(tasks, fmt.Sprintf(`{"name":"t%03d","prompt":"p"}`, i))
		}
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"big","tasks":[`+strings.Join(tasks, ",")+`]}`)))
		var ids []string
		for _, name := range []string{"one", "two"} {
			m := &models.LLMModel{ModelName: name, Name: name, Provider: "proctor", Adapter: models.AdapterOracle}
			if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, `"`+m.ID.String()+`"`)
		}
		statements := storetest.CountStatements(s)
		r := f.do("POST", "/v2/rollouts/run_list", "key", strings.NewReader(`{"taskset_id":"`+up.TasksetID.String()+
			`","model_ids":[`+strings.Join(ids, ",")+`],"group_size":50}`))
		n := statements.N()
		if r.status != 201 {
			t.Fatalf("run_list = %d %s", r.status, r.body)
		}
		var out struct {
			JobID            uuid.UUID `json:"job_id"`
			Accepted         int       `json:"accepted"`
			ResultsTruncated bool      `json:"results_truncated"`
		}
		json.Unmarshal(r.body, &out)
		if out.Accepted != 200 || !out.ResultsTruncated {
			t.Fatalf("run_list accepted %d pairs (truncated %v), want 200 pairs of 50 attempts", out.Accepted, out.ResultsTruncated)
		}
		if traces, err := rollouts.Of(s).JobTraceIDsPage(ctx, out.JobID, 0, 20000); err != nil || len(traces) != 10000 {
			t.Fatalf("the job holds %d traces, %v; want 10,000", len(traces), err)
		}
		if n > launchQueries {
			t.Errorf("launching 10,000 attempts ran %d statements, want at most %d", n, launchQueries)
		}
		t.Logf("launching 10,000 attempts ran %d statements", n)
	})
}
