package models_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/datafiles"
)

// Removing a member leaves the team what they made for it (issue 29, item 9): team-scope data
// files and staged uploads keep their rows and bytes, credited to "a former member"; their
// member-scope files go, bytes included.
func TestRemovingAMemberKeepsTheTeamsFilesAndDeletesTheirOwn(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		owner := storetest.Member(t, s, "alpha", "owner@example.com")
		bo := addMember(t, s, owner.TeamID, "bo@example.com")
		bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		teamFile := storeDataFile(t, s, bucket, bo, "shared.csv", models.DataScopeTeam, "a,b\n1,2\n")
		ownFile := storeDataFile(t, s, bucket, bo, "mine.txt", models.DataScopeMember, "private notes")
		ts, err := catalog.Of(s).CreateTaskset(ctx, bo, "briefs", "", false)
		if err != nil {
			t.Fatal(err)
		}
		up := &models.StagedFile{TasksetID: ts.ID, Name: "brief.md", ContentType: "text/markdown", SizeBytes: 5, Mode: catalog.UploadSingle,
			PartBytes: 5, PartCount: 1}
		if err := catalog.Of(s).CreateUpload(ctx, bo, up); err != nil {
			t.Fatal(err)
		}
		if err := bucket.Put(ctx, up.ObjectKey, bytes.NewReader([]byte("brief")), "text/markdown"); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Of(s).SettleUpload(ctx, up, "text/markdown", ""); err != nil {
			t.Fatal(err)
		}

		if err := s.RemoveMember(ctx, owner.TeamID, bo.MembershipID, bucket); err != nil {
			t.Fatalf("RemoveMember: %v", err)
		}

		rows, total, err := datafiles.Of(s).ListDataFiles(ctx, owner, datafiles.DataQuery{Scope: models.DataScopeTeam, Limit: 10})
		if err != nil || total != 1 || len(rows) != 1 || rows[0].ID != teamFile.ID {
			t.Fatalf("the team's files after the removal = %d %v, %v; want the team file they created", total, rows, err)
		}
		if r := rows[0]; r.MembershipID != 0 || r.OwnerName != datafiles.FormerMember || !r.CanEdit {
			t.Errorf("the team file's owner = %d %q (owner may edit: %v); want 0 %q, editable by the team's owner",
				r.MembershipID, r.OwnerName, r.CanEdit, datafiles.FormerMember)
		}
		if got := readObject(t, bucket, teamFile.ObjectKey); got != "a,b\n1,2\n" {
			t.Errorf("the team file's bytes = %q, want them kept", got)
		}
		if n, err := s.DB.NewSelect().Model((*models.DataFile)(nil)).Where("id = ?", ownFile.ID).Count(ctx); err != nil || n != 0 {
			t.Errorf("the member's own file rows = %d, %v; want it deleted", n, err)
		}
		if _, err := bucket.Stat(ctx, ownFile.ObjectKey); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("the member's own file's bytes: Stat = %v, want ErrNotFound (no orphan bytes)", err)
		}
		kept, err := catalog.Of(s).GetUpload(ctx, owner, ts.ID, up.ID)
		if err != nil || kept.Status != catalog.UploadStaged || kept.MembershipID != 0 {
			t.Fatalf("the staged upload after the removal = %+v, %v; want it staged, its creator 0", kept, err)
		}
		if got := readObject(t, bucket, up.ObjectKey); got != "brief" {
			t.Errorf("the upload's bytes = %q, want them kept", got)
		}

		// Without a bucket, a member with files of their own is refused, and nothing changes.
		cy := addMember(t, s, owner.TeamID, "cy@example.com")
		cyFile := storeDataFile(t, s, bucket, cy, "cy.txt", models.DataScopeMember, "cy")
		if err := s.RemoveMember(ctx, owner.TeamID, cy.MembershipID, nil); err == nil {
			t.Fatal("RemoveMember without a bucket removed a member whose own files have bytes")
		}
		if _, err := s.GetMembership(ctx, cy.MembershipID); err != nil {
			t.Errorf("the refused removal removed the membership: %v", err)
		}
		if _, err := datafiles.Of(s).GetDataFile(ctx, cy, cyFile.ID); err != nil {
			t.Errorf("the refused removal deleted the member's file: %v", err)
		}
		if err := s.RemoveMember(ctx, owner.TeamID, cy.MembershipID, bucket); err != nil {
			t.Fatalf("RemoveMember with the bucket: %v", err)
		}
		if err := s.RemoveMember(ctx, owner.TeamID, cy.MembershipID, bucket); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("removing a removed member = %v, want ErrNotFound", err)
		}
	})
}

func addMember(t *testing.T, s *models.Store, teamID uuid.UUID, email string) *models.Caller {
	t.Helper()
	u, m, err := s.AddMember(ctx, teamID, "", email, models.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	return &models.Caller{TeamID: teamID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
}

// storeDataFile reserves, uploads and completes a data file of c's.
func storeDataFile(t *testing.T, s *models.Store, bucket blob.Bucket, c *models.Caller, name, scope, content string) *datafiles.DataFileRow {
	t.Helper()
	f, err := datafiles.Of(s).ReserveDataFile(ctx, c, datafiles.NewDataFile{Name: name, Scope: scope, DeclaredBytes: int64(len(content))}, datafiles.DataQuota{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(ctx, f.ObjectKey, bytes.NewReader([]byte(content)), "text/plain"); err != nil {
		t.Fatal(err)
	}
	if f, err = datafiles.Of(s).CompleteDataFile(ctx, c, f.ID, int64(len(content)), "text/plain", datafiles.DataQuota{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func readObject(t *testing.T, bucket blob.Bucket, key string) string {
	t.Helper()
	r, err := bucket.Get(ctx, key)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
