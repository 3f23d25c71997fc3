// Package temporal wires Proctor to Temporal: the client, the task-queue names, and the workers that
// run the workflows and activities. The embedded development server lives in the devserver
// subpackage so that only the binary links the Temporal server.
//
// It may import workflows and activities.
package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/workflows"
)

// Task queues. Workflows and activities that need no sandbox run on QueueWorkflows; sandbox
// activities run on a queue chosen by the resources they need, so that GPU hosts join by polling
// their own queue without any change to the workflows.
const (
	QueueWorkflows    = "proctor-workflows"
	QueueSandboxesCPU = "sandboxes-cpu"
)

// GPUQueue is the queue of the hosts that have GPUs of the given type.
func GPUQueue(gpuType string) string { return "sandboxes-gpu-" + gpuType }

// DefaultQueues are the queues a CPU host's worker polls.
var DefaultQueues = []string{QueueWorkflows, QueueSandboxesCPU}

// Client is a Temporal client bound to one namespace.
type Client struct {
	client.Client
	Namespace string
}

// Dial connects to the frontend at address, retrying until ctx ends: a server started a moment
// ago may not accept connections yet.
func Dial(ctx context.Context, address, namespace string, logger *slog.Logger) (*Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:  address,
			Namespace: namespace,
			Logger:    sdklog.NewStructuredLogger(logger.With("component", "temporal-client")),
		})
		if err == nil {
			return &Client{Client: c, Namespace: namespace}, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal at %s: %w", address, errors.Join(ctx.Err(), lastErr))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// CheckHealth asks the frontend whether it serves and whether the namespace exists.
func (c *Client) CheckHealth(ctx context.Context) error {
	if _, err := c.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	if _, err := c.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.Namespace}); err != nil {
		return fmt.Errorf("temporal namespace %q: %w", c.Namespace, err)
	}
	return nil
}

// Workers are the running workers of one process, one per task queue.
type Workers struct {
	workers []worker.Worker
}

// StartWorkers starts one worker per queue. The workflow queue's worker registers every workflow;
// every worker registers the activities, so that a workflow can reach any queue.
func StartWorkers(c *Client, acts *activities.Activities, queues []string) (*Workers, error) {
	ws := &Workers{}
	for _, q := range queues {
		w := worker.New(c.Client, q, worker.Options{})
		if q == QueueWorkflows {
			RegisterWorkflows(w)
		}
		w.RegisterActivity(acts)
		if err := w.Start(); err != nil {
			ws.Stop()
			return nil, fmt.Errorf("start worker on %s: %w", q, err)
		}
		ws.workers = append(ws.workers, w)
	}
	return ws, nil
}

// RegisterWorkflows registers every workflow of the platform on w.
func RegisterWorkflows(w worker.Registry) {
	w.RegisterWorkflow(workflows.Ping)
}

// Stop stops every worker, waiting for running activities to finish or be cancelled.
func (ws *Workers) Stop() {
	for _, w := range ws.workers {
		w.Stop()
	}
	ws.workers = nil
}

// Ping runs the Ping workflow over queues and waits for its answer.
func (c *Client) Ping(ctx context.Context, queues []string) (workflows.PingResult, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		TaskQueue:                QueueWorkflows,
		WorkflowExecutionTimeout: time.Minute,
	}, workflows.Ping, workflows.PingInput{Queues: queues})
	if err != nil {
		return workflows.PingResult{}, fmt.Errorf("start ping: %w", err)
	}
	var res workflows.PingResult
	if err := run.Get(ctx, &res); err != nil {
		return workflows.PingResult{}, fmt.Errorf("ping %v: %w", queues, err)
	}
	return res, nil
}
