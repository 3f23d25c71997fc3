package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Session is a signed-in browser session: the cookie carries a random token, the row its hash.
type Session struct {
	bun.BaseModel `bun:"table:sessions"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TokenHash     string    `bun:"token_hash"`
	MembershipID  int64     `bun:"membership_id"`
	// APIKeyID is the key the session was signed in with; revoking the key ends the session.
	APIKeyID  *uuid.UUID `bun:"api_key_id,type:uuid"`
	ExpiresAt time.Time  `bun:"expires_at"`
	CreatedAt time.Time  `bun:"created_at"`
	UpdatedAt time.Time  `bun:"updated_at"`
}

// CreateSession signs a membership in for ttl and returns the session and the cookie token.
// keyID, when not nil, is the API key the user signed in with: the session ends with it.
func (s *Store) CreateSession(ctx context.Context, membershipID int64, keyID *uuid.UUID, ttl time.Duration) (*Session, string, error) {
	if _, err := s.GetMembership(ctx, membershipID); err != nil {
		return nil, "", fmt.Errorf("create session: %w", err)
	}
	token := randomToken(32)
	sess := &Session{
		ID: uuid.New(), TokenHash: hashToken(token), MembershipID: membershipID, APIKeyID: keyID,
		ExpiresAt: Now().Add(ttl), CreatedAt: Now(), UpdatedAt: Now(),
	}
	if _, err := s.DB.NewInsert().Model(sess).Exec(ctx); err != nil {
		return nil, "", fmt.Errorf("create session: %w", err)
	}
	return sess, token, nil
}

// AuthenticateSession resolves a session cookie token to its caller.
func (s *Store) AuthenticateSession(ctx context.Context, token string) (*Caller, error) {
	// A sign-in link's token is no cookie: it is redeemed once, for a session of its own.
	if token == "" || strings.HasPrefix(token, linkPrefix) {
		return nil, ErrInvalidCredentials
	}
	sess, err := liveSession(ctx, s.DB, token)
	if err != nil {
		return nil, fmt.Errorf("authenticate session: %w", err)
	}
	m, err := s.GetMembership(ctx, sess.MembershipID)
	if err != nil {
		return nil, fmt.Errorf("authenticate session: %w", err)
	}
	return &Caller{TeamID: m.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: m.Role, Kind: CredentialSession, SessionID: sess.ID}, nil
}

// liveSession reads the unexpired session row of token, or ErrInvalidCredentials. A session
// signed in with a key lives only while the key does; revoking it deletes the session too, and
// the condition covers a key revoked by hand in the database.
func liveSession(ctx context.Context, db bun.IDB, token string) (*Session, error) {
	var sess Session
	if err := db.NewSelect().Model(&sess).Where("token_hash = ?", hashToken(token)).
		Where("api_key_id IS NULL OR api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL)").Scan(ctx); err != nil {
		if IsNoRows(err) {
			return nil, ErrInvalidCredentials
		}
		return nil, err
	}
	if !Now().Before(sess.ExpiresAt) {
		return nil, ErrInvalidCredentials
	}
	return &sess, nil
}

// DeleteSession signs a session out. Deleting an absent session is not an error.
func (s *Store) DeleteSession(ctx context.Context, id uuid.UUID) error {
	if _, err := s.DB.NewDelete().Model((*Session)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// RevokeSessions ends sessions: one by id, every session of a membership, or every session of
// a team (the zero value of a selector is ignored; at least one must be given). It returns how
// many ended.
func (s *Store) RevokeSessions(ctx context.Context, sel SessionSelector) (int64, error) {
	q := s.DB.NewDelete().Model((*Session)(nil))
	switch {
	case sel.ID != uuid.Nil:
		q = q.Where("id = ?", sel.ID)
	case sel.MembershipID != 0:
		q = q.Where("membership_id = ?", sel.MembershipID)
	case sel.TeamID != uuid.Nil:
		q = q.Where("membership_id IN (SELECT id FROM memberships WHERE team_id = ?)", sel.TeamID)
	default:
		return 0, errors.New("revoke sessions: name a session, a membership or a team")
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("revoke sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// SessionSelector picks the sessions RevokeSessions ends.
type SessionSelector struct {
	ID           uuid.UUID
	MembershipID int64
	TeamID       uuid.UUID
}

// DeleteExpiredSessions removes sessions past their expiry and returns how many went.
func (s *Store) DeleteExpiredSessions(ctx context.Context) (int64, error) {
	res, err := s.DB.NewDelete().Model((*Session)(nil)).Where("expires_at <= ?", Now()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
