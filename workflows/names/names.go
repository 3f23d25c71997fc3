// Package names owns the names of Proctor's engine: its workflow ids, signal names and task
// queues. The workflows package uses them to start, signal and route work; the processes that
// poll queues (cmd/proctor, temporal), the activities that say where a try's sandbox starts and
// the configuration that adds a GPU host's queue read them here. It is a package of its own, a
// leaf that imports nothing of Proctor's, because activities may not import workflows (which
// imports activities) and the configuration should not pull in the engine.
package names

import (
	"strings"

	"github.com/google/uuid"
)

// Workflow ids. Each names one workflow per thing, so that starting it twice is refused.
func RolloutWorkflowID(traceID uuid.UUID) string { return "rollout/" + traceID.String() }
func RunListWorkflowID(jobID uuid.UUID) string   { return "runlist/" + jobID.String() }

// RunListRetryWorkflowID is the RunList that runs a job's retried attempts (POST
// /v2/jobs/{id}/retry): one id for every retry of the job, each a new run of it.
func RunListRetryWorkflowID(jobID uuid.UUID) string { return "runlist/" + jobID.String() + "/retry" }
func CancelJobWorkflowID(jobID uuid.UUID) string    { return "canceljob/" + jobID.String() }
func BuildWorkflowID(buildID uuid.UUID) string      { return "build/" + buildID.String() }

// CertifyWorkflowID is the Certify workflow of one certification of a build.
func CertifyWorkflowID(certificationID uuid.UUID) string {
	return "certify/" + certificationID.String()
}
func DiscoverWorkflowID(buildID uuid.UUID) string { return "discover/" + buildID.String() }

// ReplayCheckWorkflowID is the ReplayCheck workflow of one replay check of a build.
func ReplayCheckWorkflowID(checkID uuid.UUID) string { return "replay-check/" + checkID.String() }

// LimitAlertsWorkflowID is the one LimitAlerts workflow of a deployment.
const LimitAlertsWorkflowID = "limit-alerts"

// Signals.
const (
	// SignalRolloutDone tells a job's RunList that one of its attempts ended, with the trace id;
	// the Rollout sends it once the outcome is recorded, and the RunList's reconcile heals a lost
	// one. A Rollout whose parent watches its completion (RolloutInput.ParentWatches) sends it
	// only once told SignalParentMoved.
	SignalRolloutDone = "rollout-done"
	// SignalParentMoved tells a live Rollout that the RunList run that started it continued as
	// new: that run's watch on the child's completion is gone, so the Rollout signals its end
	// (SignalRolloutDone) to the parent's current run.
	SignalParentMoved = "parent-moved"
	// SignalHostStopped tells an attempt's Rollout that the worker whose host queue it names
	// stopped (drained) with the attempt's sandbox: the try restarts at once, without waiting for
	// the host to be taken for lost.
	SignalHostStopped = "host-stopped"
	// SignalJobResumed tells a job's RunLists that its ceiling was raised or lifted while it was
	// paused (the store says so already): they go on starting its attempts at once, rather than at
	// their next check of the store.
	SignalJobResumed = "job-resumed"
)

// Task queues. Workflows and activities that need no sandbox run on QueueWorkflows; builds on
// QueueBuilds, so that builds can run on hosts of their own. An attempt's StartEnvironment runs
// on the queue its resources pick (QueueSandboxesCPU, or GPUQueue of a type), so GPU hosts join by
// polling their own queue; every later sandbox activity of the try runs on the HostQueue of the
// worker that started the sandbox.
const (
	QueueWorkflows    = "proctor-workflows"
	QueueSandboxesCPU = "sandboxes-cpu"
	QueueBuilds       = "builds"
)

// GPUQueue is the queue of the hosts that have GPUs of the given type.
func GPUQueue(gpuType string) string { return "sandboxes-gpu-" + gpuType }

// HostQueue is the task queue only one sandbox worker process polls: the activities of a live
// sandbox are sent there. The name is unique per process, so a restarted worker never receives
// work for sandboxes it does not hold.
func HostQueue(host string) string { return "host/" + host + "/" + uuid.NewString()[:8] }

// IsHostQueue reports whether q is a HostQueue.
func IsHostQueue(q string) bool { return strings.HasPrefix(q, "host/") }
