package activities

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// buildLogWriter is a writer whose lines go to the build's log, a few at a time.
type buildLogWriter struct {
	a       *Activities
	ctx     context.Context
	buildID uuid.UUID
	mu      sync.Mutex
	partial string
	pending []string
	last    time.Time
	timer   *time.Timer // flushes lines a quiet builder left pending
}

func (a *Activities) buildLog(ctx context.Context, id uuid.UUID) *buildLogWriter {
	return &buildLogWriter{a: a, ctx: context.WithoutCancel(ctx), buildID: id, last: time.Now()}
}

func (w *buildLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(w.partial + string(p)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	w.partial = ""
	if len(p) > 0 && p[len(p)-1] != '\n' && len(lines) > 0 {
		w.partial, lines = lines[len(lines)-1], lines[:len(lines)-1]
	}
	w.pending = append(w.pending, lines...)
	switch {
	case time.Since(w.last) > 500*time.Millisecond || len(w.pending) > 200:
		w.flush()
	case len(w.pending) > 0 && w.timer == nil:
		// A follower sees these lines within half a second even if the builder falls silent.
		w.timer = time.AfterFunc(500*time.Millisecond, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.timer = nil
			w.flush()
		})
	}
	return len(p), nil
}

func (w *buildLogWriter) flush() {
	if len(w.pending) == 0 {
		return
	}
	if err := w.a.registry().AppendBuildLog(w.ctx, w.buildID, w.pending); err != nil {
		w.a.log().Warn("build log", "build", w.buildID, "error", err)
	}
	w.pending, w.last = nil, time.Now()
}

// Close writes what is left.
func (w *buildLogWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.partial != "" {
		w.pending, w.partial = append(w.pending, w.partial), ""
	}
	w.flush()
	return nil
}

// FinishBuild records how a build ended.
func (a *Activities) FinishBuild(ctx context.Context, in FinishBuildInput) (string, error) {
	b, err := a.registry().FinishBuild(ctx, in.BuildID, registry.BuildResult{Status: in.Status, Error: in.Error, Lock: in.Lock, Scenarios: ScenarioRows(in.Scenarios),
		Image: registry.BuiltImage{Digest: in.Image.Digest, ImageKey: in.Image.ImageKey, ImageName: in.Image.ImageName, Command: in.Image.Command}})
	if err != nil {
		return "", err
	}
	return b.Status, nil
}

// FinishBuildInput is how a build ended.
type FinishBuildInput struct {
	BuildID uuid.UUID `json:"build_id"`
	Status  string    `json:"status"`
	Error   string    `json:"error,omitempty"`
	// Lock and Scenarios are what discovery found, for a build that succeeded.
	Lock      models.BuildLock         `json:"lock,omitzero"`
	Scenarios []envserver.ScenarioInfo `json:"scenarios,omitempty"`
	// Image is what the build made, when it got that far.
	Image BuildImageResult `json:"image,omitzero"`
}

// BuildCertificationResult names the certification a build asked for, once launched; zero when
// it asked for none or it could not start.
type BuildCertificationResult struct {
	CertificationID uuid.UUID `json:"certification_id"`
	JobID           uuid.UUID `json:"job_id"`
}

// StartBuildCertification launches the certification a succeeded build asked for
// (rollouts.Store.StartBuildCertification). One that cannot start (its taskset has no task of the
// environment, the member who triggered the build has left) is said in the build's log, and the
// build stands.
func (a *Activities) StartBuildCertification(ctx context.Context, in BuildInput) (BuildCertificationResult, error) {
	cert, err := a.rollouts().StartBuildCertification(ctx, in.BuildID)
	var verr models.ValidationError
	switch {
	case errors.As(err, &verr), errors.Is(err, models.ErrNotFound), errors.Is(err, models.ErrConflict), errors.Is(err, models.ErrForbidden):
		return BuildCertificationResult{}, a.registry().AppendBuildLog(ctx, in.BuildID, []string{"certification not started: " + err.Error()})
	case err != nil:
		return BuildCertificationResult{}, err
	case cert == nil:
		return BuildCertificationResult{}, nil
	}
	line := fmt.Sprintf("certification %s started: job %s (the oracle %d×, the idle and random agents and the tamper probe once, per task)", cert.ID, cert.JobID, cert.K)
	if err := a.registry().AppendBuildLog(ctx, in.BuildID, []string{line}); err != nil {
		return BuildCertificationResult{}, err
	}
	return BuildCertificationResult{CertificationID: cert.ID, JobID: cert.JobID}, nil
}
