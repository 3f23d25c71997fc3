// Package credentials is the store's queries for the spec's Environment variables, Member secrets
// and Provider credentials (bring-your-own-key): the values a team seals under the platform's
// keyring, what an attempt is launched with (LaunchEnv), and their re-sealing when a key rotates.
// Its rows are the core's (models.EnvVar, models.MemberSecret, models.ByokCredential).
package credentials

import "github.com/proctorhq/proctor/models"

// Store is the credentials queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the credentials queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
