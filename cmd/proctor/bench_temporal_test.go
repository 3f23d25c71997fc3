package main

// The Temporal side of BenchmarkOrchestration: what an attempt's history shows, and the two bare
// programs the engine is measured against.

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	ptemporal "github.com/proctorhq/proctor/temporal"
)

// historyCount is what a workflow's history shows.
type historyCount struct {
	events, activities, local, workflowTasks, modelSteps int
	// offQueue says, for each activity in the order scheduled, whether it ran on a task queue
	// other than the workflow's (a sandbox host's), which Temporal cannot start eagerly.
	offQueue []bool
	// wtWait is the time workflow tasks wait to be picked up, wtRun the time workers take on
	// them, actRun the time activities run, total the workflow's whole run.
	wtWait, wtRun, actRun, total time.Duration
}

// historyOf counts a workflow's history: every event, the activities scheduled (the model steps
// among them), the local activities (markers) and the workflow tasks, and where its time went.
func historyOf(b *testing.B, tc *ptemporal.Client, workflowID string) historyCount {
	var h historyCount
	var first, wtScheduled, wtStarted time.Time
	var queue string
	actStarted := map[int64]time.Time{}
	it := tc.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			b.Fatal(err)
		}
		at := ev.GetEventTime().AsTime()
		if first.IsZero() {
			first = at
		}
		h.events++
		h.total = at.Sub(first)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			queue = ev.GetWorkflowExecutionStartedEventAttributes().GetTaskQueue().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			h.activities++
			attrs := ev.GetActivityTaskScheduledEventAttributes()
			if attrs.GetActivityType().GetName() == "ModelStep" {
				h.modelSteps++
			}
			h.offQueue = append(h.offQueue, attrs.GetTaskQueue().GetName() != queue)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			actStarted[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			h.actRun += at.Sub(actStarted[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()])
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			// A version marker (workflow.GetVersion) is no local activity.
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				h.local++
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			wtScheduled = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wtStarted = at
			h.wtWait += at.Sub(wtScheduled)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			h.workflowTasks++
			h.wtRun += at.Sub(wtStarted)
		}
	}
	return h
}

// meanHistory averages the time split of the workflows' histories.
func meanHistory(b *testing.B, tc *ptemporal.Client, workflowIDs []string) historyCount {
	var m historyCount
	for _, id := range workflowIDs {
		h := historyOf(b, tc, id)
		m.wtWait += h.wtWait
		m.wtRun += h.wtRun
		m.actRun += h.actRun
		m.total += h.total
	}
	n := time.Duration(len(workflowIDs))
	m.wtWait, m.wtRun, m.actRun, m.total = m.wtWait/n, m.wtRun/n, m.actRun/n, m.total/n
	return m
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

// bareTemporal runs orchestrationAttempts workflows of acts no-op activities and local no-op
// activities each (sequentially, as an attempt does), orchestrationConcurrency at a time, on a
// worker of its own in this process, and returns the wall time.
func bareTemporal(b *testing.B, tc *ptemporal.Client, acts, local int) (time.Duration, []string) {
	queue := "bench-bare-" + uuid.NewString()[:8]
	w := noopWorker(tc, queue)
	w.RegisterWorkflowWithOptions(noopAttempt(queue, ""), workflow.RegisterOptions{Name: "BareAttempt"})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	sem := make(chan struct{}, orchestrationConcurrency)
	var wg sync.WaitGroup
	ids := attemptIDs(queue)
	start := time.Now()
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "BareAttempt", make([]bool, acts), local)
			if err == nil {
				err = run.Get(context.Background(), nil)
			}
			if err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), ids
}

// attemptIDs are the workflow ids of a bare program's orchestrationAttempts attempts.
func attemptIDs(queue string) []string {
	ids := make([]string, orchestrationAttempts)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", queue, i)
	}
	return ids
}

func noop(context.Context, int) (int, error) { return 0, nil }

// noopWorker is a worker of queue with the no-op activity registered; the caller registers its
// workflows, then starts it.
func noopWorker(tc *ptemporal.Client, queue string) worker.Worker {
	w := worker.New(tc.Client, queue, worker.Options{})
	w.RegisterActivityWithOptions(noop, activity.RegisterOptions{Name: "Noop"})
	return w
}

// noopAttempt is the bare program's attempt: local no-op activities, then one no-op activity
// for each element of offQueue, on queue, or on host where the element is true.
func noopAttempt(queue, host string) func(workflow.Context, []bool, int) error {
	return func(ctx workflow.Context, offQueue []bool, local int) error {
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		for i := range local {
			if err := workflow.ExecuteLocalActivity(lctx, noop, i).Get(ctx, nil); err != nil {
				return err
			}
		}
		for i, off := range offQueue {
			q := queue
			if off {
				q = host
			}
			if err := workflow.ExecuteActivity(workflow.WithTaskQueue(actx, q), "Noop", i).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// shapedTemporal runs the bare program in an attempt's shape: one parent workflow starts
// orchestrationAttempts children, orchestrationConcurrency at a time, as a job's RunList does;
// each child runs local no-op activities, then a no-op activity for each of the attempt's, on the
// workflow's own queue or on a second one (a sandbox host's, which Temporal cannot start
// eagerly) as offQueue says. Where engine/bare is what the engine costs on top of the cheapest
// Temporal program, engine/shaped is what its own work (the sandbox, MCP, the store, the
// activities' code) costs on top of what Temporal charges for an attempt's shape.
func shapedTemporal(b *testing.B, tc *ptemporal.Client, offQueue []bool, local int) (time.Duration, []string) {
	queue := "bench-shaped-" + uuid.NewString()[:8]
	host := queue + "-host"
	w, hw := noopWorker(tc, queue), noopWorker(tc, host)
	w.RegisterWorkflowWithOptions(noopAttempt(queue, host), workflow.RegisterOptions{Name: "ShapedAttempt"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, ids []string, concurrency int) error {
		sel := workflow.NewSelector(ctx)
		var failed error
		running := 0
		for _, id := range ids {
			for ; running >= concurrency; running-- {
				sel.Select(ctx)
			}
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id, TaskQueue: queue,
				ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON})
			sel.AddFuture(workflow.ExecuteChildWorkflow(cctx, "ShapedAttempt", offQueue, local), func(f workflow.Future) {
				if err := f.Get(ctx, nil); err != nil {
					failed = err
				}
			})
			running++
		}
		for ; running > 0; running-- {
			sel.Select(ctx)
		}
		return failed
	}, workflow.RegisterOptions{Name: "ShapedList"})
	for _, wk := range []worker.Worker{w, hw} {
		if err := wk.Start(); err != nil {
			b.Fatal(err)
		}
		defer wk.Stop()
	}
	ids := attemptIDs(queue)
	start := time.Now()
	run, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, "ShapedList",
		ids, orchestrationConcurrency)
	if err == nil {
		err = run.Get(context.Background(), nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start), ids
}

// cpuTime is the CPU time this process and its waited-for children (mostly the sandboxes) have
// used.
func cpuTime() time.Duration { return ownCPUTime() + childrenCPUTime() }

// ownCPUTime is this process's CPU time: the server, the workers, the API and the benchmark.
func ownCPUTime() time.Duration { return rusage(syscall.RUSAGE_SELF) }

// childrenCPUTime is the CPU time of this process's waited-for children: mostly the sandboxes
// (a build's compiler, say, too).
func childrenCPUTime() time.Duration { return rusage(syscall.RUSAGE_CHILDREN) }

// rusage is the user and system CPU time getrusage(2) reports for who.
func rusage(who int) time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(who, &u) //nolint:errcheck // cannot fail with these arguments
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
