// Package rollouts is the store's queries for the spec's Jobs, Rollouts, Traces and Instances:
// launching jobs and their attempts, each try's bookkeeping (BeginTry, StartInstance, OpenTry,
// FinishTrace), trajectories and logs, retries, analytics, exports, certifications and regression
// replays. Its rows are the core's (models.Job, models.Trace, ...); it reads tasks, builds and
// launch environments through the catalog, registry and credentials Stores.
package rollouts

import "github.com/proctorhq/proctor/models"

// Store is the rollouts queries over the shared store core.
type Store struct{ *models.Store }

// Of returns the rollouts queries of a store.
func Of(s *models.Store) *Store { return &Store{s} }
