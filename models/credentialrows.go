package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// EnvVar is an environment variable of an environment, passed to its sandboxes at launch.
type EnvVar struct {
	bun.BaseModel `bun:"table:env_vars,alias:ev"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	RegistryID    uuid.UUID `bun:"registry_id,type:uuid"`
	Name          string    `bun:"name"`
	Ciphertext    []byte    `bun:"ciphertext"`
	MaskedValue   string    `bun:"masked_value"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

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

// ByokCredential is a model provider key (bring-your-own-key), one per provider per scope.
type ByokCredential struct {
	bun.BaseModel `bun:"table:byok_credentials,alias:bc"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	Scope         string    `bun:"scope"`
	MembershipID  *int64    `bun:"membership_id"`
	// OwnerKey is "team" or "member:<id>": with TeamID and Provider it is unique.
	OwnerKey    string     `bun:"owner_key"`
	Provider    string     `bun:"provider"`
	Name        string     `bun:"name"`
	Ciphertext  []byte     `bun:"ciphertext"`
	MaskedValue string     `bun:"masked_value"`
	CreatedBy   *int64     `bun:"created_by"`
	CreatedAt   time.Time  `bun:"created_at"`
	UpdatedAt   time.Time  `bun:"updated_at"`
	LastUsedAt  *time.Time `bun:"last_used_at"`
}
