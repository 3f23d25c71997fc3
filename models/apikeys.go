package models

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// APIKey is stored as a visible prefix plus the SHA-256 of the whole token; the token itself is
// shown once, at creation. Keys are 32 random bytes, so a fast hash is enough: there is nothing
// to brute-force that a slow hash would protect.
type APIKey struct {
	bun.BaseModel `bun:"table:api_keys"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	MembershipID  int64      `bun:"membership_id"`
	Name          string     `bun:"name"`
	Prefix        string     `bun:"prefix"`
	SecretHash    string     `bun:"secret_hash"`
	LastUsedAt    *time.Time `bun:"last_used_at"`
	RevokedAt     *time.Time `bun:"revoked_at"`
	CreatedAt     time.Time  `bun:"created_at"`
	UpdatedAt     time.Time  `bun:"updated_at"`
}

// API key tokens look like pk_<prefix>_<secret>; the prefix (12 characters with "pk_") is stored
// in clear so that a key can be found by index and recognised in listings.
const apiKeyScheme = "pk_"

// CreateAPIKey makes a key for a membership and returns its row and the token. The token is not
// stored and cannot be recovered.
func (s *Store) CreateAPIKey(ctx context.Context, membershipID int64, name string) (*APIKey, string, error) {
	m, err := s.GetMembership(ctx, membershipID)
	if err != nil {
		return nil, "", fmt.Errorf("create api key: %w", err)
	}
	prefix := apiKeyScheme + randomToken(4)
	token := prefix + "_" + randomToken(32)
	k := &APIKey{
		ID: uuid.New(), TeamID: m.TeamID, MembershipID: m.ID, Name: name,
		Prefix: prefix, SecretHash: hashToken(token), CreatedAt: Now(), UpdatedAt: Now(),
	}
	if _, err := s.DB.NewInsert().Model(k).Exec(ctx); err != nil {
		return nil, "", fmt.Errorf("create api key: %w", err)
	}
	return k, token, nil
}

// ListAPIKeys lists a team's keys (prefixes only, never secrets), newest first.
func (s *Store) ListAPIKeys(ctx context.Context, teamID uuid.UUID) ([]APIKey, error) {
	var keys []APIKey
	if err := s.DB.NewSelect().Model(&keys).Where("team_id = ?", teamID).Order("created_at DESC", "id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey stops a key from authenticating and ends the sessions signed in with it.
// Revoking twice is not an error.
func (s *Store) RevokeAPIKey(ctx context.Context, teamID, id uuid.UUID) error {
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model((*APIKey)(nil)).
			Set("revoked_at = COALESCE(revoked_at, ?)", Now()).Set("updated_at = ?", Now()).
			Where("id = ? AND team_id = ?", id, teamID).Exec(ctx)
		if err != nil {
			return fmt.Errorf("revoke api key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("revoke api key %s: %w", id, ErrNotFound)
		}
		if _, err := tx.NewDelete().Model((*Session)(nil)).Where("api_key_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("revoke api key: end its sessions: %w", err)
		}
		return nil
	})
}

// AuthenticateAPIKey resolves a bearer token to its caller.
func (s *Store) AuthenticateAPIKey(ctx context.Context, token string) (*Caller, error) {
	prefix, _, ok := strings.Cut(strings.TrimPrefix(token, apiKeyScheme), "_")
	if !strings.HasPrefix(token, apiKeyScheme) || !ok || len(prefix) != 8 {
		return nil, ErrInvalidCredentials
	}
	var k APIKey
	if err := s.DB.NewSelect().Model(&k).Where("prefix = ?", apiKeyScheme+prefix).Scan(ctx); err != nil {
		if IsNoRows(err) {
			return nil, ErrInvalidCredentials
		}
		return nil, fmt.Errorf("authenticate api key: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(k.SecretHash), []byte(hashToken(token))) != 1 || k.RevokedAt != nil {
		return nil, ErrInvalidCredentials
	}
	m, err := s.GetMembership(ctx, k.MembershipID)
	if err != nil {
		return nil, fmt.Errorf("authenticate api key: %w", err)
	}
	// Last use is informational; a write per request would serialise SQLite, so it is coarse.
	if k.LastUsedAt == nil || time.Since(*k.LastUsedAt) > time.Minute {
		s.DB.NewUpdate().Model((*APIKey)(nil)).Set("last_used_at = ?", Now()).Where("id = ?", k.ID).Exec(ctx) //nolint:errcheck
	}
	return &Caller{TeamID: m.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: m.Role, Kind: CredentialAPIKey, APIKeyID: k.ID}, nil
}
