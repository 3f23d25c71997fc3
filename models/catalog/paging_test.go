package catalog_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

const bigTaskset = 10_000

// uploadMany uploads n prompt-only tasks in one request and returns the taskset.
func uploadMany(tb testing.TB, s *models.Store, c *models.Caller, n int) uuid.UUID {
	tb.Helper()
	up := catalog.Upload{TasksetName: "big"}
	for i := 0; i < n; i++ {
		up.Tasks = append(up.Tasks, catalog.TaskUpload{ExternalID: fmt.Sprintf("ext-%05d", i), TaskContent: models.TaskContent{
			Name: fmt.Sprintf("task-%05d", (i*7919)%n), Prompt: "Do the thing", Args: map[string]any{"i": i}}})
	}
	res, err := catalog.Of(s).UploadTasks(ctx, c, up)
	if err != nil {
		tb.Fatal(err)
	}
	if res.TasksCreated != n {
		tb.Fatalf("created %d of %d", res.TasksCreated, n)
	}
	return res.TasksetID
}

func TestTenThousandTasksPageWithoutGapsOrDuplicates(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		c := storetest.Member(t, s, "alpha", "a@example.com")
		id := uploadMany(t, s, c, bigTaskset)
		seen := make(map[uuid.UUID]bool, bigTaskset)
		prev := ""
		for offset := 0; ; offset += 500 {
			rows, total, err := catalog.Of(s).ListTasks(ctx, c, id, catalog.TaskQuery{Limit: 500, Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if total != bigTaskset {
				t.Fatalf("total = %d, want %d", total, bigTaskset)
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				if seen[r.ID] {
					t.Fatalf("task %s (%s) on two pages", r.ID, r.Name)
				}
				if r.Name <= prev {
					t.Fatalf("order broke: %q after %q", r.Name, prev)
				}
				seen[r.ID], prev = true, r.Name
			}
		}
		if len(seen) != bigTaskset {
			t.Fatalf("paging saw %d tasks, want %d", len(seen), bigTaskset)
		}
		// Re-uploading the same 10,000 changes nothing.
		up := catalog.Upload{TasksetID: &id}
		for i := 0; i < bigTaskset; i++ {
			up.Tasks = append(up.Tasks, catalog.TaskUpload{ExternalID: fmt.Sprintf("ext-%05d", i), TaskContent: models.TaskContent{
				Name: fmt.Sprintf("task-%05d", (i*7919)%bigTaskset), Prompt: "Do the thing", Args: map[string]any{"i": i}}})
		}
		res, err := catalog.Of(s).UploadTasks(ctx, c, up)
		if err != nil || res.TasksCreated+res.TasksUpdated != 0 {
			t.Fatalf("identical re-upload = %+v, %v", res, err)
		}
	})
}

// BenchmarkListTasksPage measures one page (limit 50, random offset) of a 10,000-task taskset,
// the listing a UI pages through. Run: go test -run '^$' -bench ListTasksPage ./models/catalog/
func BenchmarkListTasksPage(b *testing.B) {
	for _, d := range storetest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			s := storetest.Open(b, d)
			c := storetest.Member(b, s, "bench", "bench@example.com")
			id := uploadMany(b, s, c, bigTaskset)
			for b.Loop() {
				if _, _, err := catalog.Of(s).ListTasks(ctx, c, id, catalog.TaskQuery{Limit: 50, Offset: rand.IntN(bigTaskset - 50)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUploadTenThousandTasks measures one upload that creates 10,000 tasks.
func BenchmarkUploadTenThousandTasks(b *testing.B) {
	for _, d := range storetest.Dialects {
		b.Run(string(d), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := storetest.Open(b, d)
				c := storetest.Member(b, s, "bench", "bench@example.com")
				b.StartTimer()
				uploadMany(b, s, c, bigTaskset)
			}
		})
	}
}
