package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// A sign-in link (proctor open) carries a one-time token that becomes a browser session when
// its member confirms it. It is kept as a session row whose token starts with linkPrefix: such
// a token is never accepted as a session cookie (AuthenticateSession), only redeemed once, by
// RedeemSignInLink, which deletes its row and signs a fresh session in.
const linkPrefix = "pl-"

// SignInLinkTTL is how long a sign-in link may wait to be used.
const SignInLinkTTL = 2 * time.Minute

// CreateSignInLink makes a one-time sign-in link token for a membership; keyID is the API key
// it was asked with (the session it becomes ends with that key, as a sign-in's does).
func (s *Store) CreateSignInLink(ctx context.Context, membershipID int64, keyID *uuid.UUID) (token string, expires time.Time, err error) {
	if _, err := s.GetMembership(ctx, membershipID); err != nil {
		return "", time.Time{}, fmt.Errorf("create sign-in link: %w", err)
	}
	token = linkPrefix + randomToken(32)
	sess := &Session{ID: uuid.New(), TokenHash: hashToken(token), MembershipID: membershipID, APIKeyID: keyID,
		ExpiresAt: Now().Add(SignInLinkTTL), CreatedAt: Now(), UpdatedAt: Now()}
	if _, err := s.DB.NewInsert().Model(sess).Exec(ctx); err != nil {
		return "", time.Time{}, fmt.Errorf("create sign-in link: %w", err)
	}
	return token, sess.ExpiresAt, nil
}

// SignInLinkFor is whom a sign-in link signs in, for the page that asks to confirm it.
type SignInLinkFor struct {
	Email, Name, Team string
}

// PeekSignInLink says whom a live, unused link token signs in, without using it; a token that
// is no link, was used, expired or whose key was revoked is ErrInvalidCredentials.
func (s *Store) PeekSignInLink(ctx context.Context, token string) (*SignInLinkFor, error) {
	sess, err := liveLink(ctx, s.DB, token)
	if err != nil {
		return nil, err
	}
	m, err := s.GetMembership(ctx, sess.MembershipID)
	if err != nil {
		return nil, fmt.Errorf("peek sign-in link: %w", err)
	}
	var u User
	if err := s.DB.NewSelect().Model(&u).Where("id = ?", m.UserID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("peek sign-in link: %w", err)
	}
	t, err := s.GetTeam(ctx, m.TeamID)
	if err != nil {
		return nil, fmt.Errorf("peek sign-in link: %w", err)
	}
	return &SignInLinkFor{Email: u.Email, Name: u.Name, Team: t.Name}, nil
}

// RedeemSignInLink uses a link token, once: its row is deleted and a session of ttl signed in
// for the same membership (and key). A second use, like any token that is no live link, is
// ErrInvalidCredentials.
func (s *Store) RedeemSignInLink(ctx context.Context, token string, ttl time.Duration) (*Session, string, error) {
	var sess *Session
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		link, err := liveLink(ctx, tx, token)
		if err != nil {
			return err
		}
		// Only the request whose delete took the row redeems it.
		res, err := tx.NewDelete().Model((*Session)(nil)).Where("id = ?", link.ID).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrInvalidCredentials
		}
		sess = link
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("redeem sign-in link: %w", err)
	}
	return s.CreateSession(ctx, sess.MembershipID, sess.APIKeyID, ttl)
}

// liveLink reads the session row of a live link token.
func liveLink(ctx context.Context, db bun.IDB, token string) (*Session, error) {
	if !strings.HasPrefix(token, linkPrefix) {
		return nil, ErrInvalidCredentials
	}
	sess, err := liveSession(ctx, db, token)
	if err != nil {
		return nil, fmt.Errorf("read sign-in link: %w", err)
	}
	return sess, nil
}
