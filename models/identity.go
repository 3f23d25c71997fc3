package models

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Team owns every team-scoped row.
type Team struct {
	bun.BaseModel `bun:"table:teams"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	Name          string    `bun:"name"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// User is a person; one user can be a member of several teams.
type User struct {
	bun.BaseModel `bun:"table:users"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	Name          string    `bun:"name"`
	Email         string    `bun:"email"`
	AvatarURL     string    `bun:"avatar_url"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// Membership ties a user to a team. Its id is an integer, as membership_id is in the API.
type Membership struct {
	bun.BaseModel `bun:"table:memberships"`
	ID            int64     `bun:"id,pk,autoincrement"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	UserID        uuid.UUID `bun:"user_id,type:uuid"`
	Role          string    `bun:"role"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// Membership roles.
const (
	RoleOwner  = "owner"
	RoleMember = "member"
)

// Project groups a team's environments; registry lists can be filtered by project.
type Project struct {
	bun.BaseModel `bun:"table:projects"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	Name          string    `bun:"name"`
	Description   string    `bun:"description"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// CredentialKind says how a caller authenticated.
type CredentialKind string

const (
	CredentialAPIKey  CredentialKind = "api_key"
	CredentialSession CredentialKind = "session"
)

// Caller is an authenticated principal: every query made on its behalf is scoped by TeamID.
type Caller struct {
	TeamID       uuid.UUID
	UserID       uuid.UUID
	MembershipID int64
	Role         string
	Kind         CredentialKind
	// APIKeyID is set when Kind is CredentialAPIKey, SessionID when it is CredentialSession.
	APIKeyID  uuid.UUID
	SessionID uuid.UUID
}

// LaunchKey is the API key work launched by the caller is billed to: the caller's key, or none
// for a session.
func (c *Caller) LaunchKey() *uuid.UUID {
	if c.Kind != CredentialAPIKey || c.APIKeyID == uuid.Nil {
		return nil
	}
	id := c.APIKeyID
	return &id
}

// ErrInvalidCredentials is returned for a token that is malformed, unknown, revoked or expired.
var ErrInvalidCredentials = errors.New("invalid credentials")

// CreateTeam inserts a team.
func (s *Store) CreateTeam(ctx context.Context, name string) (*Team, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("create team: name is empty")
	}
	t := &Team{ID: uuid.New(), Name: name, CreatedAt: Now(), UpdatedAt: Now()}
	if _, err := s.DB.NewInsert().Model(t).Exec(ctx); err != nil {
		return nil, fmt.Errorf("create team: %w", err)
	}
	return t, nil
}

// GetTeam reads a team by id.
func (s *Store) GetTeam(ctx context.Context, id uuid.UUID) (*Team, error) {
	t := new(Team)
	if err := s.DB.NewSelect().Model(t).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, NotFound(err, "get team")
	}
	return t, nil
}

// ListTeams lists every team, oldest first.
func (s *Store) ListTeams(ctx context.Context) ([]Team, error) {
	var teams []Team
	if err := s.DB.NewSelect().Model(&teams).Order("created_at ASC", "id ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return teams, nil
}

// AddMember creates the user for email if there is none and makes them a member of the team.
func (s *Store) AddMember(ctx context.Context, teamID uuid.UUID, name, email, role string) (*User, *Membership, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if email == "" || !strings.Contains(email, "@") {
		return nil, nil, fmt.Errorf("add member: invalid email %q", email)
	}
	if role != RoleOwner && role != RoleMember {
		return nil, nil, fmt.Errorf("add member: role must be %q or %q, not %q", RoleOwner, RoleMember, role)
	}
	var u User
	var m Membership
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(&u).Where("email = ?", email).Scan(ctx)
		switch {
		case err == nil:
		case IsNoRows(err):
			if name == "" {
				name = email
			}
			u = User{ID: uuid.New(), Name: name, Email: email, CreatedAt: Now(), UpdatedAt: Now()}
			if _, err := tx.NewInsert().Model(&u).Exec(ctx); err != nil {
				return err
			}
		default:
			return err
		}
		m = Membership{TeamID: teamID, UserID: u.ID, Role: role, CreatedAt: Now(), UpdatedAt: Now()}
		_, err = tx.NewInsert().Model(&m).Returning("id").Exec(ctx)
		return err
	})
	if IsUniqueViolation(err) {
		return nil, nil, fmt.Errorf("add member %s: already a member: %w", email, ErrConflict)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("add member %s: %w", email, err)
	}
	return &u, &m, nil
}

// GetMembership reads a membership by its integer id.
func (s *Store) GetMembership(ctx context.Context, id int64) (*Membership, error) {
	m := new(Membership)
	if err := s.DB.NewSelect().Model(m).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, NotFound(err, "get membership")
	}
	return m, nil
}

// ListMembers lists a team's memberships with their users, oldest first.
func (s *Store) ListMembers(ctx context.Context, teamID uuid.UUID) ([]Membership, []User, error) {
	var ms []Membership
	if err := s.DB.NewSelect().Model(&ms).Where("team_id = ?", teamID).Order("id ASC").Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("list members: %w", err)
	}
	users := make([]User, len(ms))
	for i, m := range ms {
		if err := s.DB.NewSelect().Model(&users[i]).Where("id = ?", m.UserID).Scan(ctx); err != nil {
			return nil, nil, fmt.Errorf("list members: user %s: %w", m.UserID, err)
		}
	}
	return ms, users, nil
}

// ObjectDeleter removes stored objects (blob.Bucket is one); deleting an absent object is no error.
type ObjectDeleter interface {
	Delete(ctx context.Context, key string) error
}

// RemoveMember takes a member out of a team. What was theirs alone goes with the membership: API
// keys, sessions, member secrets, personal provider keys, the spending limits set on them, and
// their member-scope data files, whose bytes objects removes. What they made for the team stays
// the team's, its creator now NULL ("a former member"): team-scope data files, staged uploads,
// and everything else the team owns (tasksets, tasks, jobs, builds...), which never referenced the
// membership. The bytes go first, so a failure leaves the member and their file rows in place and
// a retry converges; objects may be nil only while the member has no member-scope file.
func (s *Store) RemoveMember(ctx context.Context, teamID uuid.UUID, membershipID int64, objects ObjectDeleter) (err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("remove member %d: %w", membershipID, err)
		}
	}()
	if err := s.DB.NewSelect().Model((*Membership)(nil)).Column("id").Where("id = ? AND team_id = ?", membershipID, teamID).Scan(ctx, new(int64)); err != nil {
		return NotFound(err, "membership")
	}
	deleted := map[string]bool{}
	deleteBytes := func(keys []string) error {
		for _, k := range keys {
			if deleted[k] {
				continue
			}
			if objects == nil {
				return fmt.Errorf("%d member-scope data files have bytes in object storage, and no bucket was given to remove them", len(keys))
			}
			if err := objects.Delete(ctx, k); err != nil {
				return fmt.Errorf("remove the bytes of a member-scope data file (%s): %w", k, err)
			}
			deleted[k] = true
		}
		return nil
	}
	var keys []string
	if err := s.DB.NewSelect().Model((*DataFile)(nil)).Column("object_key").
		Where("membership_id = ? AND scope = ?", membershipID, DataScopeMember).Scan(ctx, &keys); err != nil {
		return err
	}
	if err := deleteBytes(keys); err != nil {
		return err
	}
	// Files the member reserved meanwhile are deleted with the rest, their bytes after the commit.
	var late []string
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		late = nil
		if err := tx.NewSelect().Model((*DataFile)(nil)).Column("object_key").
			Where("membership_id = ? AND scope = ?", membershipID, DataScopeMember).Scan(ctx, &late); err != nil {
			return err
		}
		if objects == nil && len(late) > 0 {
			return fmt.Errorf("%d member-scope data files have bytes in object storage, and no bucket was given to remove them", len(late))
		}
		if _, err := tx.NewDelete().Model((*DataFile)(nil)).Where("membership_id = ? AND scope = ?", membershipID, DataScopeMember).Exec(ctx); err != nil {
			return err
		}
		res, err := tx.NewDelete().Model((*Membership)(nil)).Where("id = ? AND team_id = ?", membershipID, teamID).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("membership: %w", ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return deleteBytes(late)
}

// CreateProject adds a project to a team; names are unique within a team.
func (s *Store) CreateProject(ctx context.Context, teamID uuid.UUID, name, description string) (*Project, error) {
	if strings.TrimSpace(name) == "" {
		return nil, errors.New("create project: name is empty")
	}
	p := &Project{ID: uuid.New(), TeamID: teamID, Name: name, Description: description, CreatedAt: Now(), UpdatedAt: Now()}
	if _, err := s.DB.NewInsert().Model(p).Exec(ctx); err != nil {
		if IsUniqueViolation(err) {
			return nil, fmt.Errorf("create project %q: %w", name, ErrConflict)
		}
		return nil, fmt.Errorf("create project: %w", err)
	}
	return p, nil
}

// ListProjects lists a team's projects by name.
func (s *Store) ListProjects(ctx context.Context, teamID uuid.UUID) ([]Project, error) {
	var ps []Project
	if err := s.DB.NewSelect().Model(&ps).Where("team_id = ?", teamID).Order("name ASC", "id ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return ps, nil
}

// GetProject reads a project visible to the team.
func (s *Store) GetProject(ctx context.Context, teamID, id uuid.UUID) (*Project, error) {
	p := new(Project)
	if err := s.DB.NewSelect().Model(p).Where("id = ? AND team_id = ?", id, teamID).Scan(ctx); err != nil {
		return nil, NotFound(err, "get project")
	}
	return p, nil
}

// Bootstrap is what a first start creates: a team, its owner and an API key.
type Bootstrap struct {
	Team       *Team
	User       *User
	Membership *Membership
	APIKey     *APIKey
	Token      string
}

// BootstrapIfEmpty creates a team, an owner and a key when the store has no member yet; it
// returns nil when there already is one, so that a restart reuses the data. Each step resumes
// where an interrupted bootstrap stopped: a team made without its owner is used, not remade.
func (s *Store) BootstrapIfEmpty(ctx context.Context, teamName, userName, email string) (*Bootstrap, error) {
	n, err := s.DB.NewSelect().Model((*Membership)(nil)).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	if n > 0 {
		return nil, nil
	}
	t := new(Team)
	if err := s.DB.NewSelect().Model(t).OrderExpr("created_at ASC").Limit(1).Scan(ctx); IsNoRows(err) {
		if t, err = s.CreateTeam(ctx, teamName); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	u, m, err := s.AddMember(ctx, t.ID, userName, email, RoleOwner)
	if err != nil {
		return nil, err
	}
	k, token, err := s.CreateAPIKey(ctx, m.ID, "bootstrap")
	if err != nil {
		return nil, err
	}
	return &Bootstrap{Team: t, User: u, Membership: m, APIKey: k, Token: token}, nil
}

// FirstOwner is the earliest owner membership: on a dev instance, the member its bootstrap made.
func (s *Store) FirstOwner(ctx context.Context) (*Membership, error) {
	m := new(Membership)
	if err := s.DB.NewSelect().Model(m).Where("role = ?", RoleOwner).OrderExpr("id ASC").Limit(1).Scan(ctx); err != nil {
		return nil, NotFound(err, "first owner")
	}
	return m, nil
}

func randomToken(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
