// Package activities holds the Temporal activities: every side effect a workflow has (database
// writes, sandboxes, MCP calls, inference, object storage) happens here, in methods of one
// Activities struct that carries the shared dependencies. Workers register the struct; tests build
// it with test dependencies.
//
// It may import models and internal packages, never workflows.
package activities

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"go.temporal.io/sdk/activity"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// Activities carries what every activity needs. Sandboxes, Envs and HostQueue are set on hosts
// that run sandboxes; Models defaults to inference.DefaultModels.
type Activities struct {
	Store     *models.Store
	Logger    *slog.Logger
	Sandboxes sandbox.Provider
	Envs      *Envs
	// HostQueue is the task queue only this process polls (see HostQueue): StartEnvironment
	// returns it so that the try's later sandbox activities reach the sandbox it started.
	HostQueue string
	Models    ModelFactory
	// Build configures builds and the images sandboxes run (nil: this worker neither builds
	// nor runs built images).
	Build *BuildConfig
	// Mail sends spending alerts (nil: alerts wait, logged, until a server is configured).
	Mail *MailConfig
	// Secrets opens the secrets sealed at rest (nil: this worker has no secrets key, and work
	// that needs one fails saying so).
	Secrets *secrets.Keyring
	// Rates price the sandboxes this worker starts (zero: environment time costs nothing).
	Rates rollouts.RateCard
	// Bucket keeps the images of tool results, which the trace references and models are sent
	// (nil: they are not kept, and a model reads a note in their place).
	Bucket blob.Bucket
	// Metrics counts sandboxes, attempt outcomes and model calls (nil: none), labelled with
	// SandboxProvider (process or container).
	Metrics         *metrics.Metrics
	SandboxProvider string
	// RefuseUnenforcedLimits refuses an attempt that declares a limit Sandboxes cannot enforce
	// on this host (sandbox.LimitGaps); without it the attempt runs and its log says so.
	RefuseUnenforcedLimits bool
	// Workflows describes the attempts' workflows, so that one that ended outside Proctor is
	// noticed (EndVanished); StartWorkers sets the Temporal client. Nil: only the store is read.
	Workflows WorkflowDescriber

	imagesOnce sync.Once
	imageCache *imageCache

	// saidOnce are the things this worker says once, by what they are about (see sayOnce).
	saidOnce sync.Map

	convOnce sync.Once
	convs    *conversations

	imgOnce  sync.Once
	imgCache *imageBytesCache
}

// rollouts is the store's jobs, traces and instances.
func (a *Activities) rollouts() *rollouts.Store { return rollouts.Of(a.Store) }

// registry is the store's environments (registries), builds and agents.
func (a *Activities) registry() *registry.Store { return registry.Of(a.Store) }

// catalog is the store's tasksets, tasks and their versions.
func (a *Activities) catalog() *catalog.Store { return catalog.Of(a.Store) }

// llms is the store's models (LLMs) and checkpoints.
func (a *Activities) llms() *llms.Store { return llms.Of(a.Store) }

// billing is the store's usage, spending limits, budgets and inference logs.
func (a *Activities) billing() *billing.Store { return billing.Of(a.Store) }

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// PingInput names the task queue a ping is meant to reach.
type PingInput struct {
	// Queue is the task queue the activity was scheduled on.
	Queue string `json:"queue"`
}

// PingResult says which worker answered.
type PingResult struct {
	// Queue echoes the queue that was reached.
	Queue string `json:"queue"`
	// Worker is the process that ran the activity, as pid@host (the SDK's default identity).
	Worker string `json:"worker"`
}

// Ping proves that a worker polls the queue it was scheduled on and can run activities: `proctor
// dev` waits for one ping per queue before it reports ready, and operators can run it against a
// cluster to check a new host.
func (a *Activities) Ping(ctx context.Context, in PingInput) (PingResult, error) {
	info := activity.GetInfo(ctx)
	host, _ := os.Hostname()
	return PingResult{Queue: info.TaskQueue, Worker: fmt.Sprintf("%d@%s", os.Getpid(), host)}, nil
}
