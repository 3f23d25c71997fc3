package catalog_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// VisibleTaskVersions answers as GetTaskVersion would for each id, in a query per 5,000 ids and
// one per distinct taskset, whatever the number of ids.
func TestVisibleTaskVersionsInBatches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		own, _ := catalog.Of(s).CreateTaskset(ctx, a, "own", "", false)
		theirs, _ := catalog.Of(s).CreateTaskset(ctx, b, "theirs", "", false)
		addTasks(t, s, a, own.ID, 3)
		addTasks(t, s, b, theirs.ID, 2)
		versionsOf := func(c *models.Caller, tasksetID uuid.UUID) []uuid.UUID {
			rows, _, err := catalog.Of(s).ListTasks(ctx, c, tasksetID, catalog.TaskQuery{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var ids []uuid.UUID
			for _, r := range rows {
				ids = append(ids, *r.LatestVersionID)
			}
			return ids
		}
		mine, others := versionsOf(a, own.ID), versionsOf(b, theirs.ID)
		ids := append(append([]uuid.UUID{}, mine...), others...)
		for range 12000 { // ids of nothing, enough for three batches
			ids = append(ids, uuid.New())
		}
		statements := storetest.CountStatements(s)
		visible, err := catalog.Of(s).VisibleTaskVersions(ctx, a, ids)
		if err != nil {
			t.Fatal(err)
		}
		if n := statements.N(); n > 3+2 {
			t.Errorf("%d queries for %d ids over 2 tasksets, want at most 5 (3 batches, one per taskset)", n, len(ids))
		}
		for _, id := range ids {
			_, err := catalog.Of(s).GetTaskVersion(ctx, a, id)
			if visible[id] != (err == nil) {
				t.Errorf("version %s: visible %v, but GetTaskVersion says %v", id, visible[id], err)
			}
		}
		if len(visible) != len(mine) {
			t.Errorf("%d visible, want the caller's %d", len(visible), len(mine))
		}
	})
}
