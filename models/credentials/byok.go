package credentials

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// BYOK scopes: a credential is one member's or the whole team's.
const (
	ScopePersonal = "personal"
	ScopeTeam     = "team"
)

// ByokContext is what a provider credential's ciphertext is bound to.
func ByokContext(id uuid.UUID) string { return "byok:" + id.String() }

// ListByokCredentials lists the caller's personal credentials and the team's.
func (s *Store) ListByokCredentials(ctx context.Context, c *models.Caller) ([]models.ByokCredential, error) {
	var out []models.ByokCredential
	err := s.DB.NewSelect().Model(&out).Where("team_id = ?", c.TeamID).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("scope = ?", ScopeTeam).WhereOr("membership_id = ?", c.MembershipID)
		}).Order("provider ASC", "scope ASC").Scan(ctx)
	return out, err
}

func ownerKey(c *models.Caller, scope string) string {
	if scope == ScopeTeam {
		return ScopeTeam
	}
	return fmt.Sprintf("member:%d", c.MembershipID)
}

// SetByokCredential creates, or replaces, the credential of provider in scope (personal: the
// caller's; team: the caller's team's, which only an owner may set).
func (s *Store) SetByokCredential(ctx context.Context, c *models.Caller, sl Sealer, scope, provider, name, value string) (*models.ByokCredential, error) {
	if scope == ScopeTeam && c.Role != models.RoleOwner {
		return nil, fmt.Errorf("only a team owner sets the team's provider credentials: %w", models.ErrForbidden)
	}
	var b models.ByokCredential
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		key := ownerKey(c, scope)
		err := tx.NewSelect().Model(&b).Where("team_id = ? AND owner_key = ? AND provider = ?", c.TeamID, key, provider).Scan(ctx)
		created := models.IsNoRows(err)
		if err != nil && !created {
			return err
		}
		if created {
			b = models.ByokCredential{ID: uuid.New(), TeamID: c.TeamID, Scope: scope, OwnerKey: key, Provider: provider, CreatedAt: models.Now(), CreatedBy: &c.MembershipID}
			if scope == ScopePersonal {
				b.MembershipID = &c.MembershipID
			}
		}
		b.Name = name
		if b.Ciphertext, b.MaskedValue, err = seal(sl, value, ByokContext(b.ID)); err != nil {
			return err
		}
		b.UpdatedAt = models.Now()
		if created {
			_, err = tx.NewInsert().Model(&b).Exec(ctx)
		} else {
			_, err = tx.NewUpdate().Model(&b).Column("name", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// byokFor loads a credential the caller may change: their own, or (an owner) the team's.
func byokFor(ctx context.Context, db bun.IDB, c *models.Caller, id uuid.UUID) (*models.ByokCredential, error) {
	var b models.ByokCredential
	if err := db.NewSelect().Model(&b).Where("id = ? AND team_id = ?", id, c.TeamID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "credential")
	}
	switch {
	case b.Scope == ScopePersonal && (b.MembershipID == nil || *b.MembershipID != c.MembershipID):
		return nil, fmt.Errorf("credential %s: %w", id, models.ErrNotFound)
	case b.Scope == ScopeTeam && c.Role != models.RoleOwner:
		return nil, fmt.Errorf("only a team owner changes the team's provider credentials: %w", models.ErrForbidden)
	}
	return &b, nil
}

// RotateByokCredential replaces a credential's key (and, when set, its name).
func (s *Store) RotateByokCredential(ctx context.Context, c *models.Caller, sl Sealer, id uuid.UUID, value string, name *string) (*models.ByokCredential, error) {
	b, err := byokFor(ctx, s.DB, c, id)
	if err != nil {
		return nil, err
	}
	if b.Ciphertext, b.MaskedValue, err = seal(sl, value, ByokContext(b.ID)); err != nil {
		return nil, err
	}
	if name != nil {
		b.Name = *name
	}
	b.UpdatedAt = models.Now()
	if _, err := s.DB.NewUpdate().Model(b).Column("name", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// DeleteByokCredential deletes a credential, its ciphertext with it.
func (s *Store) DeleteByokCredential(ctx context.Context, c *models.Caller, id uuid.UUID) error {
	b, err := byokFor(ctx, s.DB, c, id)
	if err != nil {
		return err
	}
	_, err = s.DB.NewDelete().Model(b).WherePK().Exec(ctx)
	return err
}

// ProviderCredential is the key an attempt's model calls use, and where it came from.
type ProviderCredential struct {
	Key string
	// Source is byok-personal, member-secret or byok-team.
	Source string
	// ByokID is the credential's id when a BYOK credential was used.
	ByokID *uuid.UUID
}

// ProviderKey is the key the launching member's attempts use for provider, by precedence: their
// personal BYOK credential, their secret bound to provider, their team's BYOK credential. It is
// nil when there is none (the platform's key is used). Binding is explicit: a secret merely
// named like a provider is not used.
func (s *Store) ProviderKey(ctx context.Context, sl Sealer, teamID, userID uuid.UUID, provider string) (*ProviderCredential, error) {
	var m models.Membership
	if err := s.DB.NewSelect().Model(&m).Where("team_id = ? AND user_id = ?", teamID, userID).Scan(ctx); err != nil {
		if models.IsNoRows(err) {
			return nil, nil // the launcher has left the team: the platform's key
		}
		return nil, err
	}
	var creds []models.ByokCredential
	if err := s.DB.NewSelect().Model(&creds).Where("team_id = ? AND provider = ? AND owner_key IN (?)", teamID, provider,
		bun.In([]string{ScopeTeam, fmt.Sprintf("member:%d", m.ID)})).Scan(ctx); err != nil {
		return nil, err
	}
	var team *models.ByokCredential
	for i := range creds {
		if creds[i].Scope == ScopePersonal {
			return s.useByok(ctx, sl, &creds[i], "byok-personal")
		}
		team = &creds[i]
	}
	var bound models.MemberSecret
	err := s.DB.NewSelect().Model(&bound).Where("membership_id = ? AND provider = ?", m.ID, provider).Scan(ctx)
	switch {
	case err == nil:
		key, err := open(sl, bound.Name, bound.Ciphertext, MemberSecretContext(bound.ID))
		if err != nil {
			return nil, err
		}
		return &ProviderCredential{Key: key, Source: "member-secret"}, nil
	case !models.IsNoRows(err):
		return nil, err
	}
	if team != nil {
		return s.useByok(ctx, sl, team, "byok-team")
	}
	return nil, nil
}

// useByok opens a credential and records its use.
func (s *Store) useByok(ctx context.Context, sl Sealer, b *models.ByokCredential, source string) (*ProviderCredential, error) {
	key, err := open(sl, "the "+b.Provider+" credential", b.Ciphertext, ByokContext(b.ID))
	if err != nil {
		return nil, err
	}
	if _, err := s.DB.NewUpdate().Model((*models.ByokCredential)(nil)).Set("last_used_at = ?", models.Now()).Where("id = ?", b.ID).Exec(ctx); err != nil {
		return nil, err
	}
	return &ProviderCredential{Key: key, Source: source, ByokID: &b.ID}, nil
}
