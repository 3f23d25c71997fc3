package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

func (s *Server) registerWorkers() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-worker-queues", Method: http.MethodGet, Path: "/workers", Tags: []string{"Workers"},
		Summary: "What the live workers offer",
		Description: "A Proctor extension (not in the platform spec): per task queue, the worker processes that polled it within the " +
			"last minute and the sandboxes they run at once. An attempt waits for a free sandbox on its queue, so a job runs at most " +
			"`sandbox_capacity` of its queue's attempts at a time, whatever its `max_concurrent`; a queue with no workers runs none.",
	}, authKeyOrSession), s.listWorkerQueues)
}

// WorkerQueue is what the live workers of one task queue offer.
type WorkerQueue struct {
	Queue           string `json:"queue" doc:"the task queue: proctor-workflows, builds, sandboxes-cpu or sandboxes-gpu-<type>"`
	Workers         int    `json:"workers" doc:"worker processes that polled it within the last minute"`
	SandboxCapacity int    `json:"sandbox_capacity" doc:"sandboxes they run at once, summed (0 on the workflow and build queues)"`
	GPUs            int    `json:"gpus" doc:"GPUs they hand to sandboxes, summed"`
}

type listWorkerQueuesOutput struct {
	Body struct {
		Queues          []WorkerQueue `json:"queues" nullable:"false"`
		SandboxCapacity int           `json:"sandbox_capacity" doc:"the sandbox queues' capacity, summed"`
	}
}

// listWorkerQueues serves GET /v2/workers.
func (s *Server) listWorkerQueues(ctx context.Context, _ *struct{}) (*listWorkerQueuesOutput, error) {
	caps, err := s.rollouts.QueueCapacities(ctx)
	if err != nil {
		return nil, storeError(err, "workers")
	}
	out := &listWorkerQueuesOutput{}
	out.Body.Queues = []WorkerQueue{}
	for _, c := range caps {
		out.Body.Queues = append(out.Body.Queues, WorkerQueue{Queue: c.Queue, Workers: c.Workers, SandboxCapacity: c.SandboxCapacity, GPUs: c.GPUs})
		out.Body.SandboxCapacity += c.SandboxCapacity
	}
	return out, nil
}
