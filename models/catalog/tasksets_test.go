package catalog_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

func TestTasksetVisibilityAndFlags(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		own, err := catalog.Of(s).CreateTaskset(ctx, a, "own", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := catalog.Of(s).CreateTaskset(ctx, a, "own", "", false); !errors.Is(err, models.ErrConflict) {
			t.Errorf("duplicate name in a team: %v, want ErrConflict", err)
		}
		theirs, _ := catalog.Of(s).CreateTaskset(ctx, b, "theirs-private", "", false)
		shared, _ := catalog.Of(s).CreateTaskset(ctx, b, "theirs-shared", "", false)
		public, _ := catalog.Of(s).CreateTaskset(ctx, b, "theirs-public", "", true)
		if err := catalog.Of(s).ShareTaskset(ctx, shared.ID, a.TeamID, false); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Of(s).ShareTaskset(ctx, shared.ID, a.TeamID, true); err != nil { // upgrade to write access
			t.Fatal(err)
		}
		if err := catalog.Of(s).StarTaskset(ctx, a, shared.ID); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Of(s).StarTaskset(ctx, a, shared.ID); err != nil {
			t.Errorf("starring twice: %v", err)
		}
		addTasks(t, s, a, own.ID, 3)

		list := func(q catalog.TasksetQuery) map[string]catalog.TasksetRow {
			t.Helper()
			q.Limit = 100
			rows, total, err := catalog.Of(s).ListTasksets(ctx, a, q)
			if err != nil {
				t.Fatal(err)
			}
			if total != len(rows) {
				t.Errorf("total %d, rows %d", total, len(rows))
			}
			out := map[string]catalog.TasksetRow{}
			for _, r := range rows {
				out[r.Name] = r
			}
			return out
		}
		got := list(catalog.TasksetQuery{})
		if len(got) != 2 || got["own"].ID != own.ID || got["theirs-shared"].ID != shared.ID {
			t.Fatalf("default list = %v, want own and theirs-shared", keys(got))
		}
		if r := got["own"]; !r.IsOwner || !r.CanEdit || r.TaskCount != 3 || r.IsStarred {
			t.Errorf("own row = %+v", r)
		}
		if r := got["theirs-shared"]; r.IsOwner || !r.CanEdit || !r.IsStarred || r.StarCount != 1 {
			t.Errorf("shared row = %+v", r)
		}
		if got := list(catalog.TasksetQuery{OwnerOnly: true}); len(got) != 1 || got["own"].ID != own.ID {
			t.Errorf("owner_only = %v, want own", keys(got))
		}
		// owner_only is ignored when public_only is set.
		if got := list(catalog.TasksetQuery{PublicOnly: true, OwnerOnly: true}); len(got) != 1 || got["theirs-public"].ID != public.ID || got["theirs-public"].CanEdit {
			t.Errorf("public_only = %v, want theirs-public, read-only", got)
		}
		if _, ok := list(catalog.TasksetQuery{})["theirs-private"]; ok || theirs == nil {
			t.Error("another team's private taskset is visible")
		}
	})
}

func TestTasksetSearchSortAndPaging(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		names := []string{"Bravo", "alpha", "Charlie_1", "charlie%2", "delta"}
		ids := map[string]uuid.UUID{}
		for i, n := range names {
			ts, err := catalog.Of(s).CreateTaskset(ctx, a, n, "", false)
			if err != nil {
				t.Fatal(err)
			}
			ids[n] = ts.ID
			addTasks(t, s, a, ts.ID, i)      // task counts 0..4 in creation order
			time.Sleep(2 * time.Millisecond) // distinct updated_at
		}
		catalog.Of(s).StarTaskset(ctx, a, ids["Bravo"])
		b := storetest.Member(t, s, "beta", "b@example.com")
		catalog.Of(s).ShareTaskset(ctx, ids["alpha"], b.TeamID, false)
		catalog.Of(s).StarTaskset(ctx, b, ids["alpha"])
		catalog.Of(s).StarTaskset(ctx, a, ids["alpha"])

		order := func(q catalog.TasksetQuery) string {
			t.Helper()
			q.Limit = 50
			rows, _, err := catalog.Of(s).ListTasksets(ctx, a, q)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range rows {
				out = append(out, r.Name)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			q    catalog.TasksetQuery
			want string
		}{
			{catalog.TasksetQuery{SortBy: models.SortName}, "alpha,Bravo,charlie%2,Charlie_1,delta"},
			{catalog.TasksetQuery{SortBy: models.SortDate}, "delta,charlie%2,Charlie_1,alpha,Bravo"},
			{catalog.TasksetQuery{SortBy: models.SortTasks}, "delta,charlie%2,Charlie_1,alpha,Bravo"},
			{catalog.TasksetQuery{SortBy: models.SortStars}, "alpha,Bravo," + strings.Join(sortedByID(ids, "Charlie_1", "charlie%2", "delta"), ",")},
			{catalog.TasksetQuery{SortBy: models.SortStarred}, "alpha,Bravo,delta,charlie%2,Charlie_1"},
			{catalog.TasksetQuery{SortBy: models.SortName, Search: "CHARLIE"}, "charlie%2,Charlie_1"},
			{catalog.TasksetQuery{SortBy: models.SortName, Search: "%"}, "charlie%2"},
			{catalog.TasksetQuery{SortBy: models.SortName, Search: "_"}, "Charlie_1"},
		} {
			if got := order(tc.q); got != tc.want {
				t.Errorf("%+v: got %s, want %s", tc.q, got, tc.want)
			}
		}

		// Pages of 2 cover every row exactly once, with the right total.
		seen := map[string]int{}
		for off := 0; off < 7; off += 2 {
			rows, total, err := catalog.Of(s).ListTasksets(ctx, a, catalog.TasksetQuery{SortBy: models.SortStars, Limit: 2, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			if total != 5 {
				t.Errorf("total = %d, want 5", total)
			}
			for _, r := range rows {
				seen[r.Name]++
			}
		}
		if len(seen) != 5 {
			t.Errorf("paging saw %v, want each of 5 once", seen)
		}
		for n, c := range seen {
			if c != 1 {
				t.Errorf("%s seen %d times", n, c)
			}
		}
	})
}

// addTasks uploads n prompt-only tasks into a taskset.
func addTasks(t *testing.T, s *models.Store, c *models.Caller, tasksetID uuid.UUID, n int) {
	t.Helper()
	if n == 0 {
		return
	}
	up := catalog.Upload{TasksetID: &tasksetID}
	for i := 0; i < n; i++ {
		up.Tasks = append(up.Tasks, catalog.TaskUpload{TaskContent: models.TaskContent{Name: fmt.Sprintf("task-%d", i), Prompt: "do it"}})
	}
	if _, err := catalog.Of(s).UploadTasks(ctx, c, up); err != nil {
		t.Fatal(err)
	}
}

// sortedByID orders names by their ids' text, the tie-breaker of every list.
func sortedByID(ids map[string]uuid.UUID, names ...string) []string {
	out := append([]string(nil), names...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if ids[out[j]].String() < ids[out[i]].String() {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
