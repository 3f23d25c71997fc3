// Package billing is the store's queries for the spec's Usage and Spending limits, and what the
// inference gateway records (its call log, a job's inference spend and its cost ceiling): what a
// team spent, on inference and on environments, and the limits and alerts over it. Its rows are
// the core's (models.InferenceLog, models.SpendingLimit, ...); it reads which models a caller
// sees through llms.
package billing

import "github.com/proctorhq/proctor/models"

// Store is the billing queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the billing queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
