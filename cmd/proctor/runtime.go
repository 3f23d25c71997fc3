package main

import (
	"cmp"
	"context"
	"debug/buildinfo"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/uuid"
	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/workflows/names"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// runtime is a host's part of the rollout engine: its sandboxes and the workers that use them.
type runtime struct {
	sandboxes sandbox.Provider
	describe  string // how sandboxes run here, for the logs
	workers   *ptemporal.Workers
	retire    func() // stops announcing this worker's queues and deletes them
	envs      *activities.Envs
	log       *slog.Logger
	temporal  *ptemporal.Client
	hostQueue string
	stopSweep func() // ends the sweep of the sandboxes of attempts that are over
}

// startRuntime starts this host's sandbox provider and workers. bucket holds sources and images
// (nil: this host neither builds nor runs built images).
func startRuntime(tc *ptemporal.Client, store *models.Store, bucket blob.Bucket, keys *secrets.Keyring, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*runtime, error) {
	sb, describe, err := newSandboxes(cfg, log.With("component", "sandbox"))
	if err != nil {
		return nil, fmt.Errorf("sandboxes: %w", err)
	}
	gpuRates, err := rollouts.ParseGPURates(cfg.EnvironmentGPURates)
	if err != nil {
		sb.Close(context.Background()) //nolint:errcheck
		return nil, fmt.Errorf("--environment-gpu-hourly-rates: %w", err)
	}
	acts := &activities.Activities{Store: store, Logger: log, Sandboxes: sb, Envs: activities.NewEnvs(), Secrets: keys, Bucket: bucket,
		Mail: &activities.MailConfig{URL: cfg.SMTPURL, From: cfg.MailFrom, AppURL: cfg.PublicURL},
		Rates: rollouts.RateCard{Base: cfg.EnvironmentHourlyRate, PerCPU: cfg.EnvironmentCPUHourlyRate, PerMemoryGB: cfg.EnvironmentMemoryGBRate,
			PerGPU: gpuRates, BaselineMinutes: cfg.EnvironmentBaselineMinutes},
		Metrics: m, SandboxProvider: cmp.Or(cfg.SandboxProvider, "process"), RefuseUnenforcedLimits: cfg.SandboxUnenforcedLimits == "refuse"}
	m.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "proctor_sandboxes_live", Help: "Environments running in sandboxes on this worker now.",
		ConstLabels: prometheus.Labels{"provider": acts.SandboxProvider}}, func() float64 { return float64(acts.Envs.Len()) }))
	if bucket != nil {
		envServer, err := buildEnvServer(cfg)
		if err != nil {
			sb.Close(context.Background()) //nolint:errcheck
			return nil, err
		}
		acts.Build = &activities.BuildConfig{Bucket: bucket, Dir: cfg.BuildDir, GOPROXY: cfg.BuildGOPROXY, EnvServer: envServer,
			Limits: archive.Limits{MaxBytes: cfg.BuildMaxSourceBytes, MaxEntries: cfg.BuildMaxSourceEntries}}
		acts.Build.Shell = besideSelf(cfg.ShellServer, "proctor-shell")
		if cfg.BuildCacheDir != "off" {
			acts.Build.Cache = &activities.BuildCache{Dir: cfg.BuildCacheDir}
		}
		// A bundled build packages the binary that serves the examples: proctor-examples beside
		// this one, or this one (`proctor example-env NAME`).
		if exe, err := executable(); err == nil {
			acts.Build.Bundled = bundledServer(exe, log)
		} else {
			log.Warn("bundled example environments cannot be built here", "error", err)
		}
		// A build runs at most 30 minutes: older work dirs are a killed worker's.
		if n := acts.Build.SweepStaleBuildDirs(time.Hour); n > 0 {
			log.Info("removed the work dirs of interrupted builds", "count", n, "build_dir", cfg.BuildDir)
		}
	}
	workers, err := ptemporal.StartWorkers(tc, acts, cfg.QueueList(), cfg.ShutdownTimeout)
	if err != nil {
		sb.Close(context.Background()) //nolint:errcheck
		return nil, err
	}
	rt := &runtime{sandboxes: sb, describe: describe, workers: workers, envs: acts.Envs, log: log, temporal: tc, hostQueue: acts.HostQueue}
	// An attempt ended outside Proctor (its workflow terminated through Temporal's API) never
	// comes back to tear its sandbox down: this host does, and ends the attempt.
	rt.stopSweep = every(context.Background(), activities.SweepEvery, func(ctx context.Context) {
		if n, err := acts.SweepEndedSandboxes(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sweep the sandboxes of attempts that are over", "error", err)
		} else if n > 0 {
			log.Info("stopped the sandboxes of attempts that are over", "count", n)
		}
	})
	rt.retire = announceWorker(store, workerQueues(cfg, sb), log)
	return rt, nil
}

// buildEnvServer is the envserver module Go builds supply to a source that requires it without
// carrying it (image.GoSpec.EnvServer): --build-envserver-dir, else the envserver of the checkout
// this process runs from, else none.
func buildEnvServer(cfg *config.Config) (string, error) {
	if dir := cfg.BuildEnvServerDir; dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return "", fmt.Errorf("--build-envserver-dir: not a module: %w", err)
		}
		return dir, nil
	}
	if root, err := sourceRoot(); err == nil {
		return filepath.Join(root, "envserver"), nil
	}
	return "", nil
}

// workerQueues are the rows this process announces: each queue it polls, with its sandbox
// capacity on the sandbox queues.
func workerQueues(cfg *config.Config, sb sandbox.Provider) []models.WorkerQueue {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
	var rows []models.WorkerQueue
	for _, q := range cfg.QueueList() {
		row := models.WorkerQueue{Worker: id, Queue: q, Hostname: host}
		if q != names.QueueWorkflows && q != names.QueueBuilds {
			row.SandboxCapacity, row.GPUs, row.GPUType = sb.Capacity(), len(cfg.GPUList()), cfg.GPUType
		}
		rows = append(rows, row)
	}
	return rows
}

// announceWorker writes this worker's queues now and every rollouts.WorkerAnnounceEvery (so that
// GET /v2/workers counts it) until the returned retire is called, which deletes them.
func announceWorker(store *models.Store, rows []models.WorkerQueue, log *slog.Logger) (retire func()) {
	stop := every(context.Background(), rollouts.WorkerAnnounceEvery, func(ctx context.Context) {
		if err := rollouts.Of(store).AnnounceWorker(ctx, rows); err != nil && ctx.Err() == nil {
			log.Warn("announce this worker's queues", "error", err)
		}
	})
	return func() {
		stop()
		if len(rows) == 0 {
			return
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if err := rollouts.Of(store).RetireWorker(rctx, rows[0].Worker); err != nil {
			log.Warn("retire this worker's queues", "error", err)
		}
	}
}

// stop drains this worker: it stops announcing itself and polling, lets the activities that run
// finish (up to timeout), then stops every sandbox left, and tells the attempts that lost theirs
// (their workflows start a new try on another worker at once).
func (r *runtime) stop(timeout time.Duration) {
	r.retire()
	r.stopSweep()
	if n := r.envs.Len(); n > 0 {
		r.log.Info("draining: letting running steps finish", "environments", n, "timeout", timeout)
	}
	r.workers.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	abandoned := r.envs.Running()
	r.sandboxes.Close(ctx) //nolint:errcheck // each sandbox is killed at the deadline
	// Their workflows start a new try at once, told so, rather than waiting for this host's
	// queue to go unanswered.
	for _, a := range abandoned {
		r.log.Warn("abandoning an attempt: its sandbox stopped with this worker, and the attempt starts again on another", "trace", a.TraceID, "try", a.Attempt)
		if err := r.temporal.SignalWorkflow(ctx, names.RolloutWorkflowID(a.TraceID), "", names.SignalHostStopped, r.hostQueue); err != nil {
			r.log.Info("tell an abandoned attempt (it restarts once the host is taken for lost)", "trace", a.TraceID, "error", err)
		}
	}
}

// agentRelay is the proctor-relay binary the providers give brought agents (the process provider
// only where it may not enter a sandbox's network namespace): the one named, else proctor-relay
// beside this binary when there is one, else none.
func agentRelay(named string) string { return besideSelf(named, "proctor-relay") }

// besideSelf is the program named, else the program called name beside this binary when there
// is one, else "".
func besideSelf(named, name string) string {
	if named != "" {
		return named
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	beside := filepath.Join(filepath.Dir(self), name)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
		return beside
	}
	return ""
}

// newSandboxes starts cfg's sandbox provider and says how it runs sandboxes.
func newSandboxes(cfg *config.Config, log *slog.Logger) (sandbox.Provider, string, error) {
	if cfg.SandboxProvider == "kubernetes" {
		return newKubeSandboxes(cfg, log)
	}
	if cfg.SandboxProvider == "container" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := container.New(ctx, container.Options{
			Host: cfg.ContainerHost, Owner: cfg.ContainerOwner, Root: cfg.SandboxRoot, MaxSandboxes: cfg.MaxSandboxes, MaxProcesses: cfg.SandboxMaxProcesses,
			GPUs: cfg.GPUList(), GPUType: cfg.GPUType, Logger: log, Relay: agentRelay(cfg.AgentRelay),
		})
		if err != nil {
			return nil, "", err
		}
		return p, "containers on " + p.Engine(), nil
	}
	p, err := sandbox.NewProcess(sandbox.ProcessOptions{
		Root: cfg.SandboxRoot, MaxSandboxes: cfg.MaxSandboxes, Isolation: cfg.SandboxIsolation,
		MaxProcesses: cfg.SandboxMaxProcesses, MaxOpenFiles: cfg.SandboxMaxOpenFiles, RunAs: cfg.SandboxRunAs,
		GPUs: cfg.GPUList(), GPUType: cfg.GPUType, Logger: log, Relay: agentRelay(cfg.AgentRelay),
	})
	if err != nil {
		return nil, "", err
	}
	return p, "processes, isolation " + p.Isolation() + "; " + p.Limits(), nil
}

// newKubeSandboxes runs sandboxes as pods of the cluster in --kubeconfig, or of the one the worker
// runs in (its service account's token and namespace).
func newKubeSandboxes(cfg *config.Config, log *slog.Logger) (sandbox.Provider, string, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: %w (set --kubeconfig outside a cluster)", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, "", fmt.Errorf("kubernetes: %w", err)
	}
	ns := cfg.KubeNamespace
	if ns == "" {
		ns = "default"
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	var pullSecrets []string
	if cfg.KubeImagePullSecret != "" {
		pullSecrets = []string{cfg.KubeImagePullSecret}
	}
	nodes, _ := config.NodeSelector(cfg.KubeNodeSelector) // checked with the configuration
	gpuNodes, _ := config.NodeSelector(cfg.KubeGPUNodeSelector)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kube.New(ctx, kube.Options{
		Client: cs, Attacher: kube.NewAttacher(rc, cs), Forwarder: kube.NewForwarder(rc, cs), Relay: agentRelay(cfg.AgentRelay), Namespace: ns, Owner: cfg.ContainerOwner, MaxSandboxes: cfg.MaxSandboxes,
		Registry: cfg.KubeRegistry, RegistryOptions: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)},
		GPUs: cfg.GPUList(), GPUType: cfg.GPUType, NodeSelector: nodes, GPUNodeSelector: gpuNodes, Logger: log,
		ImagePullSecrets: pullSecrets, UserNamespaces: cfg.KubeUserNamespaces,
	})
	if err != nil {
		return nil, "", err
	}
	return p, "pods in namespace " + ns + " of " + rc.Host, nil
}

// executable is the running binary's path (a variable, so that a test can stand a
// proctor-examples beside a binary of its own).
var executable = os.Executable

// bundledServer is the binary a bundled build packages: environments.Binary beside exe when it
// is there (an executable Go program) and built from the same revision as this binary, which
// starts an attempt's environment without the platform's package initialization; else exe
// itself, which serves the examples as well. A proctor-examples of another revision (left from
// an earlier build) is passed over, with a warning, so that the examples run are the ones whose
// source this binary uploads.
func bundledServer(exe string, log *slog.Logger) string {
	small := filepath.Join(filepath.Dir(exe), environments.Binary)
	if fi, err := os.Stat(small); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return exe
	}
	theirs, err := buildinfo.ReadFile(small)
	if err != nil {
		log.Warn("bundled example environments: "+environments.Binary+" beside this binary is not a Go program; packaging this binary", "path", small, "error", err)
		return exe
	}
	own, _ := debug.ReadBuildInfo()
	if !sameRevision(own, theirs) {
		log.Warn("bundled example environments: "+environments.Binary+" beside this binary was built from another revision; packaging this binary",
			"path", small, "revision", revision(theirs), "this_revision", revision(own))
		return exe
	}
	return small
}

// sameRevision reports whether two builds come from the same VCS revision; a build that records
// none matches any.
func sameRevision(a, b *debug.BuildInfo) bool {
	ra, rb := revision(a), revision(b)
	return ra == "" || rb == "" || ra == rb
}

// revision is the VCS revision a build records ("" when it records none: go run, tests,
// -buildvcs=false).
func revision(bi *debug.BuildInfo) string { return buildSetting(bi, "vcs.revision") }

// buildSetting is the value of a build's setting key ("" when it has none, or bi is nil).
func buildSetting(bi *debug.BuildInfo, key string) string {
	if bi == nil {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
