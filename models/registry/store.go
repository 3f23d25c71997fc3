// Package registry is the store's queries for the spec's Registries (environments) and Builds:
// environments and their stars, builds with their sources, logs, secrets, scenarios and locks,
// the latest build and its certification gate, and the team's agents. Its rows are the core's
// (models.Registry, models.Build, ...).
package registry

import "github.com/proctorhq/proctor/models"

// Store is the registry queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the registry queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
