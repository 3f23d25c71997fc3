package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// MemberSecret is a secret of one member, private to them; bound to a model provider it is their
// key for that provider, else it is passed to the sandboxes of the attempts they launch.
type MemberSecret struct {
	bun.BaseModel `bun:"table:member_secrets,alias:ms"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	MembershipID  int64     `bun:"membership_id"`
	Name          string    `bun:"name"`
	Provider      *string   `bun:"provider"`
	Ciphertext    []byte    `bun:"ciphertext"`
	MaskedValue   string    `bun:"masked_value"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// MemberSecretContext is what a member secret's ciphertext is bound to.
func MemberSecretContext(id uuid.UUID) string { return "member-secret:" + id.String() }

// ListMemberSecrets lists the caller's own secrets by name.
func (s *Store) ListMemberSecrets(ctx context.Context, c *Caller) ([]MemberSecret, error) {
	var out []MemberSecret
	if err := s.DB.NewSelect().Model(&out).Where("membership_id = ?", c.MembershipID).Order("name ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("member secrets: %w", err)
	}
	return out, nil
}

// SetMemberSecret creates the caller's secret, or updates the one of that name; provider, when
// set, binds it to that model provider (a provider has at most one bound secret per member).
func (s *Store) SetMemberSecret(ctx context.Context, c *Caller, sl Sealer, name, value string, provider *string) (*MemberSecret, error) {
	var m MemberSecret
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		err := tx.NewSelect().Model(&m).Where("membership_id = ? AND name = ?", c.MembershipID, name).Scan(ctx)
		created := IsNoRows(err)
		if err != nil && !created {
			return err
		}
		if created {
			m = MemberSecret{ID: uuid.New(), TeamID: c.TeamID, MembershipID: c.MembershipID, Name: name, CreatedAt: Now()}
		}
		if provider != nil {
			m.Provider = provider
		}
		if m.Ciphertext, m.MaskedValue, err = seal(sl, value, MemberSecretContext(m.ID)); err != nil {
			return err
		}
		m.UpdatedAt = Now()
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
	if isUniqueViolation(err) && provider != nil {
		return fmt.Errorf("another of your secrets is bound to %s (one per provider): %w", *provider, ErrConflict)
	}
	return err
}

// UpdateMemberSecret changes the caller's secret: its value when value is set, its binding when
// setProvider (provider nil unbinds).
func (s *Store) UpdateMemberSecret(ctx context.Context, c *Caller, sl Sealer, id uuid.UUID, value *string, setProvider bool, provider *string) (*MemberSecret, error) {
	var m MemberSecret
	if err := s.DB.NewSelect().Model(&m).Where("id = ? AND membership_id = ?", id, c.MembershipID).Scan(ctx); err != nil {
		return nil, NotFound(err, "secret")
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
	m.UpdatedAt = Now()
	_, err = s.DB.NewUpdate().Model(&m).Column("provider", "ciphertext", "masked_value", "updated_at").WherePK().Exec(ctx)
	if err := providerTaken(err, provider); err != nil {
		return nil, err
	}
	return &m, nil
}

// DeleteMemberSecret deletes the caller's secret.
func (s *Store) DeleteMemberSecret(ctx context.Context, c *Caller, id uuid.UUID) error {
	res, err := s.DB.NewDelete().Model((*MemberSecret)(nil)).Where("id = ? AND membership_id = ?", id, c.MembershipID).Exec(ctx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", id, ErrNotFound)
	}
	return nil
}
