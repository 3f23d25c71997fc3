package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Data-file scopes and statuses.
const (
	DataScopeMember = "member" // readable and writable by the member who owns it
	DataScopeTeam   = "team"   // readable by every member; writable by its owner and team owners

	DataPending = "pending" // reserved: its bytes are being uploaded
	DataReady   = "ready"   // completed: its size and type are the stored object's
)

// DataFile is one file of a team's file store. MembershipID is its creator, 0 (NULL) once they
// have left the team.
type DataFile struct {
	bun.BaseModel `bun:"table:data_files,alias:df"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	MembershipID  int64      `bun:"membership_id,nullzero"`
	Scope         string     `bun:"scope"`
	Group         string     `bun:"group_name"`
	Name          string     `bun:"name"`
	Status        string     `bun:"status"`
	DeclaredBytes int64      `bun:"declared_bytes"`
	SizeBytes     int64      `bun:"size_bytes"`
	ContentType   string     `bun:"content_type"`
	ObjectKey     string     `bun:"object_key"`
	CreatedAt     time.Time  `bun:"created_at"`
	UpdatedAt     time.Time  `bun:"updated_at"`
	CompletedAt   *time.Time `bun:"completed_at"`
}
