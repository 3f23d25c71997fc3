package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/datafiles"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/workflows/names"
	"github.com/spf13/cobra"
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
	tc, err := tel.dial(ctx, cfg.TemporalAddress, cfg, keys, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	api := newAPI(cfg, tel, httpapi.Options{Store: store, Bucket: bucket, Temporal: tc, Workflows: tc, Builds: tc, Blob: blobHandler,
		Logger: log, Secrets: keys, CodecOrigin: cfg.TemporalUIOrigin})
	if err := tc.StartLimitAlerts(ctx, cfg.LimitAlertInterval); err != nil {
		return err
	}
	hs, err := startHTTP(cfg.HTTPAddr, api.Handler(), limitsOf(cfg), log)
	if err != nil {
		return err
	}
	hs.srv.RegisterOnShutdown(api.EndStreams)
	if cfg.MetricsAddr != "" {
		ms, err := serveMetrics(cfg.MetricsAddr, cfg.MetricsToken, tel.metrics, limitsOf(cfg), log)
		if err != nil {
			hs.shutdown(cfg.ShutdownTimeout) //nolint:errcheck // failing already
			return err
		}
		defer ms.stopLogged(cfg.ShutdownTimeout, log, "metrics listener")
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
		hs, err := serveMetrics(cfg.MetricsAddr, cfg.MetricsToken, m, limitsOf(cfg), log)
		if err != nil {
			rt.stop(cfg.ShutdownTimeout)
			return err
		}
		defer hs.stopLogged(cfg.ShutdownTimeout, log, "metrics listener")
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

// newAPI is the /v2 API as the server and dev serve it: parts names what the process opened,
// and the configuration and telemetry give the rest of its options.
func newAPI(cfg *config.Config, tel *telemetry, parts httpapi.Options) *httpapi.Server {
	parts.Metrics, parts.MetricsToken, parts.Tracing = tel.metrics, cfg.MetricsToken, tel.tracing.TracerProvider()
	parts.Uploads = uploadLimits(cfg)
	parts.DataQuota = datafiles.DataQuota{TeamBytes: cfg.DataTeamBytes, FileBytes: cfg.DataFileBytes, TeamFiles: cfg.DataTeamFiles}
	parts.PublicURL, parts.SessionTTL = cfg.PublicURL, cfg.SessionTTL
	parts.MaxBodyBytes, parts.MaxJobAttempts = cfg.MaxBodyBytes, cfg.MaxJobAttempts
	parts.BodyBytesInFlight, parts.BodyStreams, parts.BodyMinRate = cfg.HTTPBodyBytesInFlight, cfg.HTTPBodyStreams, cfg.HTTPBodyMinRate
	return httpapi.New(parts)
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
