// Package catalog is the store's queries for the spec's Tasksets and Tasks: tasksets, their tasks
// and versions, task uploads (resolved against the environments' scenarios), review stages,
// comments and mentions, activity, briefs and the ready-check. Its rows are the core's
// (models.Taskset, models.Task, models.TaskVersion, ...); it reads environments and their
// scenarios through the registry Store.
package catalog

import "github.com/proctorhq/proctor/models"

// Store is the catalog queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the catalog queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
