package credentials

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// MemberSecretContext is what a member secret's ciphertext is bound to.
func MemberSecretContext(id uuid.UUID) string { return "member-secret:" + id.String() }

// ListMemberSecrets lists the caller's own secrets by name.
func (s *Store) ListMemberSecrets(ctx context.Context, c *models.Caller) ([]models.MemberSecret, error) {
	var out []models.MemberSecret
	if err := s.DB.NewSelect().Model(&out).Where("membership_id = ?", c.MembershipID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("member secrets: %w", err)
	}
	return out, nil
}

// SetMemberSecret creates the caller's secret, or updates the one of that name; provider, when
// set, binds it to that model provider (a provider has at most one bound secret per member).
func (s *Store) SetMemberSecret(ctx context.Context, c *models.Caller, sl Sealer, name, value string, provider *string) (*models.MemberSecret, error) {
	var m models.MemberSecret
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(&m).Where("membership_id = ? AND name = ?", c.MembershipID, name).Scan(ctx)
		created := models.IsNoRows(err)
		if err != nil && !created {
			return err
		}
		if created {
			m = models.MemberSecret{ID: uuid.New(), TeamID: c.TeamID, MembershipID: c.MembershipID, Name: name, CreatedAt: models.Now()}
		}
		if provider != nil {
			m.Provider = provider
		}
		if m.Ciphertext, m.MaskedValue, err = seal(sl, value, MemberSecretContext(m.ID)); err != nil {
			return err
		}
		m.UpdatedAt = models.Now()
		if created {
			_, err = tx.NewInsert().Model(&m).Exec(ctx)
		} else {
			_, err = tx.NewUpdate().Model(&m).Column("provider", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
		}
		return providerTaken(err, provider)
	})
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func providerTaken(err error, provider *string) error {
	if models.IsUniqueViolation(err) && provider != nil {
		return fmt.Errorf("another of your secrets is bound to %s (one per provider): %w", *provider, models.ErrConflict)
	}
	return err
}

// UpdateMemberSecret changes the caller's secret: its value when value is set, its binding when
// setProvider (provider nil unbinds).
func (s *Store) UpdateMemberSecret(ctx context.Context, c *models.Caller, sl Sealer, id uuid.UUID, value *string, setProvider bool, provider *string) (*models.MemberSecret, error) {
	var m models.MemberSecret
	if err := s.DB.NewSelect().Model(&m).Where("id = ? AND membership_id = ?", id, c.MembershipID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "secret")
	}
	var err error
	if value != nil {
		if m.Ciphertext, m.MaskedValue, err = seal(sl, *value, MemberSecretContext(m.ID)); err != nil {
			return nil, err
		}
	}
	if setProvider {
		m.Provider = provider
	}
	m.UpdatedAt = models.Now()
	_, err = s.DB.NewUpdate().Model(&m).Column("provider", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
	if err := providerTaken(err, provider); err != nil {
		return nil, err
	}
	return &m, nil
}

// DeleteMemberSecret deletes the caller's secret.
func (s *Store) DeleteMemberSecret(ctx context.Context, c *models.Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*models.MemberSecret)(nil)).Where("id = ? AND membership_id = ?", id, c.MembershipID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", id, models.ErrNotFound)
	}
	return nil
}
