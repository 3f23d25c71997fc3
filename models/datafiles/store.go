// Package datafiles is the store's queries for the spec's Data files: files a member or the team
// keeps for its tasks and agents, their quota and their uploads. Its rows are the core's
// (models.DataFile).
package datafiles

import "github.com/proctorhq/proctor/models"

// Store is the datafiles queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the datafiles queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
