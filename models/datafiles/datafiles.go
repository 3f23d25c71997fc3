package datafiles

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// FormerMember is the owner name of a team file whose creator has been removed from the team: the
// file stays the team's (see Store.RemoveMember), its owner_membership_id becomes 0.
const FormerMember = "a former member"

// DataFileRow is a file with its owner's name and whether the caller may change it.
type DataFileRow struct {
	models.DataFile `bun:",extend"`
	OwnerName       string `bun:"owner_name,scanonly"`
	CanEdit         bool   `bun:"-"`
}

// DataQuota bounds a team's data files (0: no bound).
type DataQuota struct {
	TeamBytes int64 // what a team's files may take in all, pending ones at their declared size
	FileBytes int64 // one file
	TeamFiles int   // how many files a team may have
}

// ErrQuota is returned (wrapped) when a file would take a team past its quota.
var ErrQuota = errors.New("over the data quota")

// readableData narrows q (aliased df) to the files the caller may read.
func readableData(q *bun.SelectQuery, c *models.Caller) *bun.SelectQuery {
	return q.Where("df.team_id = ?", c.TeamID).WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
		return w.Where("df.scope = ?", models.DataScopeTeam).WhereOr("df.membership_id = ?", c.MembershipID)
	})
}

func (r *DataFileRow) fill(c *models.Caller) {
	r.CanEdit = r.MembershipID == c.MembershipID || (r.Scope == models.DataScopeTeam && c.Role == models.RoleOwner)
}

func dataSelect(s *Store, dest any, c *models.Caller) *bun.SelectQuery {
	return readableData(s.DB.NewSelect().Model(dest).ColumnExpr("df.*").
		ColumnExpr("COALESCE((SELECT u.name FROM memberships AS m JOIN users AS u ON u.id = m.user_id WHERE m.id = df.membership_id), ?) AS owner_name",
			FormerMember), c)
}

// DataUsage is what a team's files take.
type DataUsage struct {
	UsedBytes     int64 `bun:"used"`     // ready files, at their stored size
	ReservedBytes int64 `bun:"reserved"` // pending files, at their declared size
	Files         int   `bun:"files"`
	Pending       int   `bun:"pending"`
}

// DataUsage sums a team's files.
func (s *Store) DataUsage(ctx context.Context, db bun.IDB, teamID uuid.UUID) (DataUsage, error) {
	var u DataUsage
	err := db.NewSelect().Model((*models.DataFile)(nil)).
		ColumnExpr("COALESCE(SUM(CASE WHEN status = ? THEN size_bytes ELSE 0 END), 0) AS used", models.DataReady).
		ColumnExpr("COALESCE(SUM(CASE WHEN status = ? THEN declared_bytes ELSE 0 END), 0) AS reserved", models.DataPending).
		ColumnExpr("count(*) AS files, COALESCE(SUM(CASE WHEN status = ? THEN 1 ELSE 0 END), 0) AS pending", models.DataPending).
		Where("team_id = ?", teamID).Scan(ctx, &u)
	if err != nil {
		return u, fmt.Errorf("data usage: %w", err)
	}
	return u, nil
}

// checkQuota says why adding bytes (and a file, when newFile) would break q, or nil.
func checkQuota(u DataUsage, q DataQuota, bytes int64, newFile bool) error {
	switch {
	case q.FileBytes > 0 && bytes > q.FileBytes:
		return fmt.Errorf("the file is %d bytes; one file may be at most %d: %w", bytes, q.FileBytes, ErrQuota)
	case q.TeamBytes > 0 && u.UsedBytes+u.ReservedBytes+bytes > q.TeamBytes:
		return fmt.Errorf("the team's files take %d bytes (%d more reserved) of its %d; %d more do not fit: %w",
			u.UsedBytes, u.ReservedBytes, q.TeamBytes, bytes, ErrQuota)
	case newFile && q.TeamFiles > 0 && u.Files+1 > q.TeamFiles:
		return fmt.Errorf("the team has %d files, its most: %w", u.Files, ErrQuota)
	}
	return nil
}

// NewDataFile is a file to reserve.
type NewDataFile struct {
	Name          string
	Group         string
	Scope         string
	DeclaredBytes int64
}

// ReserveDataFile records a pending file owned by the caller, if the team's quota holds its
// declared size; the object key is fresh, so a reserved file never overwrites another's bytes.
func (s *Store) ReserveDataFile(ctx context.Context, c *models.Caller, in NewDataFile, q DataQuota) (*DataFileRow, error) {
	if in.Scope == "" {
		in.Scope = models.DataScopeMember
	}
	f := &models.DataFile{ID: uuid.New(), TeamID: c.TeamID, MembershipID: c.MembershipID, Scope: in.Scope, Group: in.Group, Name: in.Name,
		Status: models.DataPending, DeclaredBytes: in.DeclaredBytes, CreatedAt: models.Now(), UpdatedAt: models.Now()}
	f.ObjectKey = fmt.Sprintf("data/%s/%s", c.TeamID, f.ID)
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := s.lockTeam(ctx, tx, c.TeamID); err != nil {
			return err
		}
		if err := s.dataNameFree(ctx, tx, c, f); err != nil {
			return err
		}
		u, err := s.DataUsage(ctx, tx, c.TeamID)
		if err != nil {
			return err
		}
		if err := checkQuota(u, q, in.DeclaredBytes, true); err != nil {
			return err
		}
		_, err = tx.NewInsert().Model(f).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.GetDataFile(ctx, c, f.ID)
}

// lockTeam serializes a team's quota checks (Postgres; SQLite has one writer anyway).
func (s *Store) lockTeam(ctx context.Context, tx bun.Tx, teamID uuid.UUID) error {
	if s.Dialect != models.Postgres {
		return nil
	}
	_, err := tx.NewRaw("SELECT id FROM teams WHERE id = ? FOR UPDATE", teamID).Exec(ctx)
	return err
}

// dataNameFree refuses a name its owner's scope already has in the same group.
func (s *Store) dataNameFree(ctx context.Context, db bun.IDB, c *models.Caller, f *models.DataFile) error {
	q := db.NewSelect().Model((*models.DataFile)(nil)).Where("team_id = ? AND scope = ? AND group_name = ? AND name = ? AND id <> ?",
		f.TeamID, f.Scope, f.Group, f.Name, f.ID)
	if f.Scope == models.DataScopeMember {
		q = q.Where("membership_id = ?", f.MembershipID)
	}
	n, err := q.Count(ctx)
	if err != nil {
		return fmt.Errorf("data file name: %w", err)
	}
	if n > 0 {
		where := "the team's files"
		if f.Scope == models.DataScopeMember {
			where = "your files"
		}
		if f.Group != "" {
			where += " in " + f.Group
		}
		return fmt.Errorf("%s already have a file named %q: %w", where, f.Name, models.ErrConflict)
	}
	return nil
}

// GetDataFile reads a file the caller may read.
func (s *Store) GetDataFile(ctx context.Context, c *models.Caller, id uuid.UUID) (*DataFileRow, error) {
	var row DataFileRow
	if err := dataSelect(s, &row, c).Where("df.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "data file")
	}
	row.fill(c)
	return &row, nil
}

// CompleteDataFile marks a pending file ready with the size and type of its stored object (read
// by the caller from the bucket), if the quota holds them. Completing a ready file again is a
// no-op.
func (s *Store) CompleteDataFile(ctx context.Context, c *models.Caller, id uuid.UUID, size int64, contentType string, q DataQuota) (*DataFileRow, error) {
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := s.lockTeam(ctx, tx, c.TeamID); err != nil {
			return err
		}
		var f models.DataFile
		if err := tx.NewSelect().Model(&f).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
			return models.NotFound(err, "data file")
		}
		if f.Status == models.DataReady {
			return nil
		}
		u, err := s.DataUsage(ctx, tx, c.TeamID)
		if err != nil {
			return err
		}
		u.ReservedBytes -= f.DeclaredBytes // its reservation becomes its stored size
		if err := checkQuota(u, q, size, false); err != nil {
			return err
		}
		at := models.Now()
		_, err = tx.NewUpdate().Model((*models.DataFile)(nil)).Where("id = ?", id).Set("status = ?", models.DataReady).Set("size_bytes = ?", size).
			Set("content_type = ?", contentType).Set("completed_at = ?", at).Set("updated_at = ?", at).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.GetDataFile(ctx, c, id)
}

// DataQuery narrows a listing: scope all (every readable file), member (the caller's own member
// files) or team (the team's files); MembershipID keeps one member's files.
type DataQuery struct {
	Scope        string
	MembershipID *int64
	Group        *string
	Limit        int
	Offset       int
}

// ListDataFiles pages the files the caller may read, newest first.
func (s *Store) ListDataFiles(ctx context.Context, c *models.Caller, q DataQuery) ([]DataFileRow, int, error) {
	rows := []DataFileRow{}
	sel := dataSelect(s, &rows, c)
	switch q.Scope {
	case models.DataScopeMember:
		sel = sel.Where("df.scope = ? AND df.membership_id = ?", models.DataScopeMember, c.MembershipID)
	case models.DataScopeTeam:
		sel = sel.Where("df.scope = ?", models.DataScopeTeam)
	}
	if q.MembershipID != nil {
		sel = sel.Where("df.membership_id = ?", *q.MembershipID)
	}
	if q.Group != nil {
		sel = sel.Where("df.group_name = ?", *q.Group)
	}
	total, err := sel.OrderExpr("df.created_at DESC, df.id DESC").Limit(int64(q.Limit)).Offset(int64(q.Offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list data files: %w", err)
	}
	for i := range rows {
		rows[i].fill(c)
	}
	return rows, int(total), nil
}

// DataGroup is one folder of the files the caller may read.
type DataGroup struct {
	Name      string    `bun:"group_name"`
	Files     int       `bun:"files"`
	Bytes     int64     `bun:"bytes"`
	UpdatedAt time.Time `bun:"updated_at"`
}

// DataGroups summarizes the folders of the files the caller may read, by name ("" is the root).
func (s *Store) DataGroups(ctx context.Context, c *models.Caller) ([]DataGroup, error) {
	out := []DataGroup{}
	err := readableData(s.DB.NewSelect().Model((*models.DataFile)(nil)), c).ColumnExpr("df.group_name, count(*) AS files").
		ColumnExpr("COALESCE(SUM(df.size_bytes), 0) AS bytes, MAX(df.updated_at) AS updated_at").
		GroupExpr("df.group_name").OrderExpr("df.group_name ASC").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("data groups: %w", err)
	}
	return out, nil
}

// DataFileUpdate renames or moves a file; nil fields stay.
type DataFileUpdate struct {
	Name  *string
	Group *string
}

// UpdateDataFile renames or moves a file the caller may change.
func (s *Store) UpdateDataFile(ctx context.Context, c *models.Caller, id uuid.UUID, u DataFileUpdate) (*DataFileRow, error) {
	row, err := s.GetDataFile(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !row.CanEdit {
		return nil, fmt.Errorf("the file is %s's: %w", row.OwnerName, models.ErrForbidden)
	}
	f := row.DataFile
	if u.Name != nil {
		f.Name = *u.Name
	}
	if u.Group != nil {
		f.Group = *u.Group
	}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := s.dataNameFree(ctx, tx, c, &f); err != nil {
			return err
		}
		f.UpdatedAt = models.Now()
		_, err := tx.NewUpdate().Model(&f).Column("name", "group_name", "updated_at").WherePK().Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.GetDataFile(ctx, c, id)
}

// DeleteDataFiles deletes the files, all or none: every id must be a file the caller may read
// (else ErrNotFound naming it) and change (else ErrForbidden). It returns their object keys,
// for the caller to remove from the bucket.
func (s *Store) DeleteDataFiles(ctx context.Context, c *models.Caller, ids []uuid.UUID) ([]string, error) {
	var keys []string
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var rows []DataFileRow
		if err := readableData(tx.NewSelect().Model(&rows).ColumnExpr("df.*"), c).Where("df.id IN (?)", bun.In(ids)).Scan(ctx); err != nil {
			return fmt.Errorf("delete data files: %w", err)
		}
		byID := map[uuid.UUID]*DataFileRow{}
		for i := range rows {
			rows[i].fill(c)
			byID[rows[i].ID] = &rows[i]
		}
		for _, id := range ids {
			r := byID[id]
			if r == nil {
				return fmt.Errorf("data file %s: %w", id, models.ErrNotFound)
			}
			if !r.CanEdit {
				return fmt.Errorf("data file %s is another member's: %w", id, models.ErrForbidden)
			}
			keys = append(keys, r.ObjectKey)
		}
		_, err := tx.NewDelete().Model((*models.DataFile)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}
