// Package llms is the store's queries for the spec's Models: the team's models and forks, their
// checkpoints and training tokens, and a model's results over the jobs it ran. Its rows are the
// core's (models.LLMModel, models.Checkpoint).
package llms

import "github.com/proctorhq/proctor/models"

// Store is the llms queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the llms queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
