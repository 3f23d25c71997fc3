package temporal

import (
	"context"
	"errors"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/google/uuid"
)

// answers is a client.Client whose starts fail with each error of errs in turn, then succeed.
type answers struct {
	client.Client
	errs  []error
	calls int
}

func (a *answers) ExecuteWorkflow(context.Context, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	a.calls++
	if len(a.errs) > 0 {
		err := a.errs[0]
		a.errs = a.errs[1:]
		return nil, err
	}
	return nil, nil
}

func TestAStartIsRetriedOnlyWhileTheFrontendIsSlowOrUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		errs  []error
		ok    bool
		calls int
	}{
		{"slow, then unreachable, then shedding load", []error{context.DeadlineExceeded, serviceerror.NewUnavailable("down"),
			serviceerror.NewResourceExhausted(0, "busy")}, true, 4},
		{"already started", []error{serviceerror.NewWorkflowExecutionAlreadyStarted("running", "", "")}, true, 1},
		{"refused", []error{serviceerror.NewInvalidArgument("bad input")}, false, 1},
		{"refused after a slow answer", []error{serviceerror.NewDeadlineExceeded("slow"), errors.New("namespace gone")}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answers{errs: tc.errs}
			err := (&Client{Client: a}).StartRollout(t.Context(), uuid.New())
			if (err == nil) != tc.ok || a.calls != tc.calls {
				t.Fatalf("start = %v after %d calls, want ok=%v after %d", err, a.calls, tc.ok, tc.calls)
			}
		})
	}
	// A caller that gives up is not kept waiting for the frontend.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a := &answers{errs: []error{serviceerror.NewUnavailable("down"), serviceerror.NewUnavailable("down")}}
	if err := (&Client{Client: a}).StartRollout(ctx, uuid.New()); err == nil || a.calls != 1 {
		t.Fatalf("a cancelled start = %v after %d calls, want an error after 1", err, a.calls)
	}
}
