package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/uuid"
	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/tracing"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/workflows/names"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func openStore(ctx context.Context, cfg *config.Config, migrate bool, log *slog.Logger) (*models.Store, error) {
	store, err := models.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if migrate {
		applied, err := store.Migrate(ctx)
		if err != nil {
			store.Close()
			return nil, err
		}
		if len(applied) > 0 {
			log.Info("applied migrations", "dialect", store.Dialect, "migrations", applied)
		}
	}
	return store, nil
}

// openBucket opens object storage; a local bucket's signed URLs are served by the API under /blob/.
func openBucket(ctx context.Context, cfg *config.Config) (blob.Bucket, http.Handler, error) {
	if strings.HasPrefix(cfg.BlobURL, "file://") && cfg.SigningKey == "" {
		return nil, nil, errors.New("a file:// bucket needs PROCTOR_SIGNING_KEY (--signing-key) to sign its URLs")
	}
	b, err := blob.Open(ctx, cfg.BlobURL, blob.Options{PublicBaseURL: cfg.PublicURL, SigningKey: []byte(cfg.SigningKey), MaxUploadBytes: cfg.MaxUploadBytes})
	if err != nil {
		return nil, nil, fmt.Errorf("open object storage: %w", err)
	}
	var h http.Handler
	if hb, ok := b.(interface{ Handler() http.Handler }); ok {
		h = hb.Handler()
	}
	return b, h, nil
}

// loadOrCreateSecret reads a secret kept in a 0600 file, creating it on first use.
func loadOrCreateSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	s := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", err
	}
	return s, nil
}

// httpServer serves the API on a listener until shutdown.
type httpServer struct {
	srv  *http.Server
	addr string
	done chan error
}

// httpLimits are the bounds of the API's HTTP server (config: --http-*).
type httpLimits struct {
	read, write, idle time.Duration
	maxConns          int
}

func limitsOf(cfg *config.Config) httpLimits {
	return httpLimits{read: cfg.HTTPReadTimeout, write: cfg.HTTPWriteTimeout, idle: cfg.HTTPIdleTimeout, maxConns: cfg.HTTPMaxConns}
}

func startHTTP(addr string, h http.Handler, lim httpLimits, log *slog.Logger) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return serveHTTP(l, h, lim, log), nil
}

// serveHTTP serves h on l, within lim.
func serveHTTP(l net.Listener, h http.Handler, lim httpLimits, log *slog.Logger) *httpServer {
	if lim.maxConns > 0 {
		l = &limitListener{Listener: l, slots: make(chan struct{}, lim.maxConns), closed: make(chan struct{})}
	}
	hs := &httpServer{
		srv: &http.Server{
			Handler: h,
			// A slow or idle client cannot hold a connection for ever: the headers within 10 s,
			// the whole request within read, the answer within write, and an idle keep-alive
			// connection closes after idle.
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       lim.read,
			WriteTimeout:      lim.write,
			IdleTimeout:       lim.idle,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		addr: l.Addr().String(),
		done: make(chan error, 1),
	}
	go func() {
		err := hs.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		hs.done <- err
	}()
	return hs
}

// limitListener accepts at most cap(slots) connections at once; the next Accept waits for one
// to close (the client waits in the kernel's backlog meanwhile).
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close also ends an Accept waiting for a slot, so that a shutdown is not held up.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// shutdown stops accepting, lets in-flight requests finish within timeout, then closes the rest.
func (hs *httpServer) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.srv.Shutdown(ctx)
	if err != nil {
		hs.srv.Close()
	}
	return errors.Join(err, <-hs.done)
}

// telemetry is what a long-running process reports to: its Prometheus metrics, and its traces
// when --otlp-endpoint names a collector.
type telemetry struct {
	metrics *metrics.Metrics
	tracing *tracing.Provider
}

func startTelemetry(ctx context.Context, cfg *config.Config, role string, log *slog.Logger) (*telemetry, error) {
	tp, err := tracing.Start(ctx, cfg.OTLPEndpoint, role, versionString(), log)
	if err != nil {
		return nil, err
	}
	return &telemetry{metrics: metrics.New(), tracing: tp}, nil
}

// dial connects to Temporal with the SDK's metrics and the tracing interceptor, so workflows
// and activities continue the trace of what started them.
func (t *telemetry) dial(ctx context.Context, address string, cfg *config.Config, keys *secrets.Keyring, log *slog.Logger) (*ptemporal.Client, error) {
	ic, err := t.tracing.TemporalInterceptor()
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tc, err := ptemporal.DialObserved(dialCtx, address, cfg.TemporalNamespace, log, sealerOf(keys), ptemporal.Observe{Metrics: t.metrics.Temporal(), Tracing: ic})
	if err != nil {
		return nil, err
	}
	tc.MaxTries = cfg.MaxTries
	return tc, nil
}

// stop exports the spans still buffered, within timeout.
func (t *telemetry) stop(timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.tracing.Shutdown(ctx); err != nil {
		log.Warn("export the last spans", "error", err)
	}
}

func serverCommand(stderr io.Writer) *cobra.Command {
	return configCommand(&cobra.Command{Use: "server", Short: "Run the API server (Postgres, an existing Temporal, a bucket)",
		Long: "Runs the /v2 API against Postgres, an existing Temporal and a bucket.\nApply migrations first with `proctor migrate`."},
		func(ctx context.Context, cfg *config.Config) error { return runServer(ctx, cfg, stderr) })
}

func runServer(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	if err := cfg.RequireProduction(true); err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, false, log)
	if err != nil {
		return err
	}
	defer store.Close()
	bucket, blobHandler, err := openBucket(ctx, cfg)
	if err != nil {
		return err
	}
	defer bucket.Close()
	keys, err := openSecrets(cfg, false, log)
	if err != nil {
		return err
	}
	tel, err := startTelemetry(ctx, cfg, "server", log)
	if err != nil {
		return err
	}
	defer tel.stop(cfg.ShutdownTimeout, log)
	m := tel.metrics
	tc, err := tel.dial(ctx, cfg.TemporalAddress, cfg, keys, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	api := httpapi.New(httpapi.Options{Metrics: m, Tracing: tel.tracing.TracerProvider(), Uploads: uploadLimits(cfg), DataQuota: models.DataQuota{TeamBytes: cfg.DataTeamBytes, FileBytes: cfg.DataFileBytes, TeamFiles: cfg.DataTeamFiles},
		Store: store, Bucket: bucket, Temporal: tc, Workflows: tc, Builds: tc, Blob: blobHandler, Logger: log, PublicURL: cfg.PublicURL,
		SessionTTL: cfg.SessionTTL, MaxBodyBytes: cfg.MaxBodyBytes, MaxJobAttempts: cfg.MaxJobAttempts, Secrets: keys,
		CodecOrigin: cfg.TemporalUIOrigin,
	})
	if err := tc.StartLimitAlerts(ctx, cfg.LimitAlertInterval); err != nil {
		return err
	}
	hs, err := startHTTP(cfg.HTTPAddr, api.Handler(), limitsOf(cfg), log)
	if err != nil {
		return err
	}
	defer sweepSessions(ctx, store, log)()
	log.Info("api server listening", "addr", hs.addr, "public_url", cfg.PublicURL)
	select {
	case <-ctx.Done():
	case err := <-hs.done:
		return err
	}
	log.Info("api server stopping")
	return hs.shutdown(cfg.ShutdownTimeout)
}

func workerCommand(stderr io.Writer) *cobra.Command {
	return configCommand(&cobra.Command{Use: "worker", Short: "Run Temporal workers for the task queues in --queues"},
		func(ctx context.Context, cfg *config.Config) error { return runWorker(ctx, cfg, stderr) })
}

func runWorker(ctx context.Context, cfg *config.Config, stderr io.Writer) error {
	if err := cfg.RequireProduction(false); err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, false, log)
	if err != nil {
		return err
	}
	defer store.Close()
	// A worker writes what its activities produce: against another schema it would fail later,
	// half-way through attempts.
	if err := store.CheckSchema(ctx); err != nil {
		return fmt.Errorf("refusing to start the worker: %w", err)
	}
	keys, err := openSecrets(cfg, false, log)
	if err != nil {
		return err
	}
	tel, err := startTelemetry(ctx, cfg, "worker", log)
	if err != nil {
		return err
	}
	defer tel.stop(cfg.ShutdownTimeout, log)
	m := tel.metrics
	tc, err := tel.dial(ctx, cfg.TemporalAddress, cfg, keys, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	var bucket blob.Bucket
	if cfg.BlobURL != "" {
		b, _, err := openBucket(ctx, cfg)
		if err != nil {
			return err
		}
		defer b.Close()
		bucket = b
	} else if slices.Contains(cfg.QueueList(), names.QueueBuilds) {
		return errors.New("a worker polling the builds queue needs object storage: set PROCTOR_BLOB_URL (--blob-url)")
	}
	rt, err := startRuntime(tc, store, bucket, keys, cfg, m, log)
	if err != nil {
		return err
	}
	if cfg.MetricsAddr != "" {
		hs, err := serveMetrics(cfg.MetricsAddr, m, limitsOf(cfg), log)
		if err != nil {
			rt.stop(cfg.ShutdownTimeout)
			return err
		}
		defer func() {
			if err := hs.shutdown(cfg.ShutdownTimeout); err != nil {
				log.Warn("metrics listener shutdown", "error", err)
			}
		}()
	}
	log.Info("worker polling", "queues", cfg.QueueList(), "temporal", cfg.TemporalAddress, "sandboxes", rt.describe)
	<-ctx.Done()
	log.Info("worker stopping")
	rt.stop(cfg.ShutdownTimeout)
	return nil
}

func migrateCommand(stdout, stderr io.Writer) *cobra.Command {
	return configCommand(&cobra.Command{Use: "migrate", Short: "Apply pending database migrations and exit",
		Long: "Applies every pending migration to --database-url and exits."},
		func(ctx context.Context, cfg *config.Config) error { return runMigrate(ctx, cfg, stdout, stderr) })
}

func runMigrate(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) error {
	if err := cfg.RequireProduction(false); err != nil {
		return err
	}
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, false, log)
	if err != nil {
		return err
	}
	defer store.Close()
	applied, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "database is up to date")
		return nil
	}
	for _, name := range applied {
		fmt.Fprintln(stdout, "applied", name)
	}
	return nil
}

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
}

// startRuntime starts this host's sandbox provider and workers. bucket holds sources and images
// (nil: this host neither builds nor runs built images).
func startRuntime(tc *ptemporal.Client, store *models.Store, bucket blob.Bucket, keys *secrets.Keyring, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*runtime, error) {
	sb, describe, err := newSandboxes(cfg, log.With("component", "sandbox"))
	if err != nil {
		return nil, fmt.Errorf("sandboxes: %w", err)
	}
	gpuRates, err := models.ParseGPURates(cfg.EnvironmentGPURates)
	if err != nil {
		sb.Close(context.Background()) //nolint:errcheck
		return nil, fmt.Errorf("--environment-gpu-hourly-rates: %w", err)
	}
	acts := &activities.Activities{Store: store, Logger: log, Sandboxes: sb, Envs: activities.NewEnvs(), Secrets: keys, Bucket: bucket,
		Mail: &activities.MailConfig{URL: cfg.SMTPURL, From: cfg.MailFrom, AppURL: cfg.PublicURL},
		Rates: models.RateCard{Base: cfg.EnvironmentHourlyRate, PerCPU: cfg.EnvironmentCPUHourlyRate, PerMemoryGB: cfg.EnvironmentMemoryGBRate,
			PerGPU: gpuRates, BaselineMinutes: cfg.EnvironmentBaselineMinutes},
		Metrics: m, SandboxProvider: cmp.Or(cfg.SandboxProvider, "process")}
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
		// This binary serves the bundled examples (`proctor example-env NAME`): a bundled build
		// packages it.
		if exe, err := os.Executable(); err == nil {
			acts.Build.Bundled = exe
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

// announceWorker writes this worker's queues now and every models.WorkerAnnounceEvery (so that
// GET /v2/workers counts it) until the returned retire is called, which deletes them.
func announceWorker(store *models.Store, rows []models.WorkerQueue, log *slog.Logger) (retire func()) {
	stop := every(context.Background(), models.WorkerAnnounceEvery, func(ctx context.Context) {
		if err := store.AnnounceWorker(ctx, rows); err != nil && ctx.Err() == nil {
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
		if err := store.RetireWorker(rctx, rows[0].Worker); err != nil {
			log.Warn("retire this worker's queues", "error", err)
		}
	}
}

// serveMetrics serves m at /metrics on addr, with the API's HTTP limits, until the returned
// server is shut down.
func serveMetrics(addr string, m *metrics.Metrics, lim httpLimits, log *slog.Logger) (*httpServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, busy("the metrics listener", addr, "--metrics-addr (or PROCTOR_METRICS_ADDR)", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	// A liveness probe for the worker: it answers while the process serves, as the API's does.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(httpapi.HealthBody{Status: "ok"}) //nolint:errcheck // the client went away
	})
	hs := serveHTTP(ln, mux, lim, log)
	log.Info("serving metrics", "url", "http://"+hs.addr+"/metrics")
	return hs, nil
}

// cmdHealthcheck asks url (the API's /readyz by default; a worker's /healthz on its
// --metrics-addr) and fails unless it answers 200: images without curl use it for their health
// checks.
func cmdHealthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	url := "http://127.0.0.1:8080/readyz"
	if len(args) == 1 {
		url = args[0]
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, res.Status)
	return nil
}

// openSecrets loads the secrets key. Dev creates one in the data dir; elsewhere a process
// without --secrets-key-file runs without one, and what needs it says so.
func openSecrets(cfg *config.Config, dev bool, log *slog.Logger) (*secrets.Keyring, error) {
	switch {
	case cfg.SecretsKMSURI != "":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return secrets.OpenKMS(ctx, cfg.SecretsKMSURI)
	case dev:
		return secrets.LoadOrCreate(cfg.SecretsKeyFile)
	case cfg.SecretsKeyFile == "":
		log.Info("no secrets key (PROCTOR_SECRETS_KEY_FILE or PROCTOR_SECRETS_KMS_URI): secrets cannot be stored or used")
		return nil, nil
	}
	return secrets.Load(cfg.SecretsKeyFile)
}

// sealerOf is keys as the Temporal client takes them: nil (no codec) without a key.
func sealerOf(keys *secrets.Keyring) ptemporal.Sealer {
	if keys == nil {
		return nil
	}
	return keys
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
			Host: cfg.ContainerHost, Owner: cfg.ContainerOwner, Root: cfg.SandboxRoot, MaxSandboxes: cfg.MaxSandboxes,
			GPUs: cfg.GPUList(), GPUType: cfg.GPUType, Logger: log,
		})
		if err != nil {
			return nil, "", err
		}
		return p, "containers on " + p.Engine(), nil
	}
	p, err := sandbox.NewProcess(sandbox.ProcessOptions{
		Root: cfg.SandboxRoot, MaxSandboxes: cfg.MaxSandboxes, Isolation: cfg.SandboxIsolation,
		GPUs: cfg.GPUList(), GPUType: cfg.GPUType, Logger: log,
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
		Client: cs, Attacher: kube.NewAttacher(rc, cs), Namespace: ns, Owner: cfg.ContainerOwner, MaxSandboxes: cfg.MaxSandboxes,
		Registry: cfg.KubeRegistry, RegistryOptions: []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)},
		GPUs: cfg.GPUList(), GPUType: cfg.GPUType, NodeSelector: nodes, GPUNodeSelector: gpuNodes, Logger: log,
		ImagePullSecrets: pullSecrets,
	})
	if err != nil {
		return nil, "", err
	}
	return p, "pods in namespace " + ns + " of " + rc.Host, nil
}

// stop drains this worker: it stops announcing itself and polling, lets the activities that run
// finish (up to timeout), then stops every sandbox left, and tells the attempts that lost theirs
// (their workflows start a new try on another worker at once).
func (r *runtime) stop(timeout time.Duration) {
	r.retire()
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

// sessionSweepEvery is how often an API process deletes expired sessions.
const sessionSweepEvery = 10 * time.Minute

// sweepSessions deletes expired sessions now and every sessionSweepEvery until the returned stop
// is called (stop waits for the sweeper to end). Several API processes sweeping is harmless.
func sweepSessions(ctx context.Context, store *models.Store, log *slog.Logger) (stop func()) {
	return every(ctx, sessionSweepEvery, func(ctx context.Context) {
		if n, err := store.DeleteExpiredSessions(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sweep expired sessions", "error", err)
		} else if n > 0 {
			log.Info("swept expired sessions", "count", n)
		}
	})
}

// every runs fn now and every interval until the returned stop is called (stop waits for a run
// in progress to end; fn's context is cancelled first).
func every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			fn(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// uploadLimits are the configured bounds of task attachments.
func uploadLimits(cfg *config.Config) httpapi.UploadLimits {
	var types []string
	for _, t := range strings.Split(cfg.UploadAllowedTypes, ",") {
		if t = strings.TrimSpace(t); t != "" {
			types = append(types, t)
		}
	}
	return httpapi.UploadLimits{MaxBytes: cfg.UploadMaxBytes, PartBytes: cfg.UploadPartBytes, AllowedTypes: types}
}
