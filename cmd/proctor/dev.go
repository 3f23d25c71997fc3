package main

import (
	"context"
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
	"strconv"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/temporal/devserver"
	"github.com/proctorhq/proctor/workflows/names"
	"github.com/spf13/cobra"
)

// devInfo is what a started dev instance tells its caller (the banner, tests, client commands).
type devInfo struct {
	APIURL          string  `json:"api_url"`
	DocsURL         string  `json:"docs_url"`
	TemporalUIURL   string  `json:"temporal_ui_url"`
	TemporalAddress string  `json:"temporal_address"`
	APIKey          string  `json:"api_key"`
	TeamID          string  `json:"team_id"`
	MembershipID    int64   `json:"membership_id"`
	DataDir         string  `json:"-"`
	StartupSeconds  float64 `json:"-"`
}

// credentialsFile holds the bootstrap key; client commands read it to reach the local instance.
const credentialsFile = "credentials.json"

// cmdDev runs the whole platform in one process. ready, when not nil, receives the instance's
// addresses once every part answers.
func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- devInfo) error {
	return execute(ctx, devCommand(stdout, stderr, ready), args)
}

func devCommand(stdout, stderr io.Writer, ready chan<- devInfo) *cobra.Command {
	return configCommand(&cobra.Command{Use: "dev", Short: "Start everything in one process on embedded defaults (API, Temporal + UI, workers, SQLite, local storage)",
		Long: "Starts the API, an embedded Temporal server with its Web UI, a worker for every task queue,\nSQLite and local object storage in one process, with nothing to install or configure.\nState lives in --data-dir; a second start reuses it."},
		func(ctx context.Context, cfg *config.Config) error { return runDev(ctx, cfg, stdout, stderr, ready) })
}

// runDev starts dev's parts in order, each followed by its deferred stop (so they stop in
// reverse), waits until every queue's worker answers, then serves until ctx ends.
func runDev(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer, ready chan<- devInfo) error {
	listener, err := listenDev(cfg)
	if err != nil {
		return err
	}
	defer listener.Close()
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := ownDataDir(cfg.DataDir, log); err != nil {
		return err
	}
	ts, err := startEmbeddedTemporal(cfg, log)
	if err != nil {
		return err
	}
	defer stopEmbeddedTemporal(ts, log)

	d, err := openDevData(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.close()
	store, info, keys, bucket := d.store, d.info, d.keys, d.bucket

	tel, err := startTelemetry(ctx, cfg, "dev", log)
	if err != nil {
		return err
	}
	defer tel.stop(cfg.ShutdownTimeout, log)
	tc, err := tel.dial(ctx, ts.FrontendAddress(), cfg, keys, log)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := seedModels(ctx, store); err != nil {
		return err
	}
	rt, err := startRuntime(tc, store, bucket, keys, cfg, tel.metrics, log)
	if err != nil {
		return err
	}
	defer rt.stop(cfg.ShutdownTimeout)
	if err := seedOnce(ctx, cfg, store, bucket, tc, info.APIKey, log); err != nil {
		return err
	}

	if err := tc.StartLimitAlerts(ctx, cfg.LimitAlertInterval); err != nil {
		return err
	}
	api := newAPI(cfg, tel, httpapi.Options{Store: store, Bucket: bucket, Temporal: tc, Workflows: tc, Builds: tc, Blob: d.blob,
		Logger: log, Secrets: keys, CodecOrigin: "http://" + ts.UIAddress()})
	hs := serveHTTP(listener, api.Handler(), limitsOf(cfg), log)
	hs.srv.RegisterOnShutdown(api.EndStreams)
	defer sweepSessions(ctx, store, log)()
	defer hs.stopLogged(cfg.ShutdownTimeout, log, "api server")
	if cfg.MetricsAddr != "" {
		ms, err := serveMetrics(cfg.MetricsAddr, cfg.MetricsToken, tel.metrics, limitsOf(cfg), log)
		if err != nil {
			return err
		}
		defer ms.stopLogged(cfg.ShutdownTimeout, log, "metrics listener")
	}

	if err := waitForWorkers(ctx, tc, cfg.QueueList()); err != nil {
		return err
	}

	if err := announceReady(stdout, info, "http://"+hs.addr, ts, start, d.firstStart, ready); err != nil {
		return err
	}

	<-ctx.Done()
	fmt.Fprintln(stdout, "\nproctor dev: stopping…")
	return nil
}

// devData is what dev keeps in its data dir: the store (migrated), the dev API key (firstStart:
// made by this start), the secrets keyring and the object store.
type devData struct {
	store      *models.Store
	info       devInfo
	firstStart bool
	keys       *secrets.Keyring
	bucket     blob.Bucket
	blob       http.Handler
}

// openDevData opens dev's data; on error nothing stays open.
func openDevData(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *devData, err error) {
	d := &devData{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.store, err = openStore(ctx, cfg, true, log); err != nil {
		return nil, err
	}
	if d.info, d.firstStart, err = devKey(ctx, d.store, cfg.DataDir, log); err != nil {
		return nil, err
	}
	if d.keys, err = devSecrets(cfg, log); err != nil {
		return nil, err
	}
	if d.bucket, d.blob, err = openBucket(ctx, cfg); err != nil {
		return nil, err
	}
	return d, nil
}

// close closes the object store, then the store.
func (d *devData) close() {
	if d.bucket != nil {
		d.bucket.Close()
	}
	if d.store != nil {
		d.store.Close()
	}
}

// listenDev binds the API's address first, then fills dev's defaults: with port 0 the address
// (and so the public URL that signed object-storage URLs carry) is known only once bound.
func listenDev(cfg *config.Config) (net.Listener, error) {
	listener, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, busy("the API", cfg.HTTPAddr, "--http-addr 127.0.0.1:8081 (or PROCTOR_HTTP_ADDR)", err)
	}
	cfg.HTTPAddr = listener.Addr().String()
	if err := cfg.FillDevDefaults(); err != nil {
		listener.Close()
		return nil, err
	}
	return listener, nil
}

// announceReady records where the instance answers in the key file (which clients find it by),
// prints the banner and tells a waiting caller.
func announceReady(stdout io.Writer, info devInfo, apiBase string, ts *devserver.Server, start time.Time, firstStart bool, ready chan<- devInfo) error {
	info.APIURL, info.DocsURL = apiBase, apiBase+"/docs"
	info.TemporalUIURL, info.TemporalAddress = "http://"+ts.UIAddress(), ts.FrontendAddress()
	if err := writeDevCredentials(info); err != nil {
		return err
	}
	info.StartupSeconds = time.Since(start).Seconds()
	printBanner(stdout, info, firstStart)
	if ready != nil {
		ready <- info
	}
	return nil
}

// ownDataDir makes the data directory, which holds the databases, the key and every stored
// object: the owner's alone, even when it existed before.
func ownDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("narrow the data dir's mode: %w", err)
		}
		log.Info("narrowed the data directory's mode to 0700", "data_dir", dir, "was", fi.Mode().Perm().String())
	}
	return nil
}

// startEmbeddedTemporal starts dev's Temporal server and its UI, saying first which flag frees
// a port that is taken (the embedded server cannot say which one is).
func startEmbeddedTemporal(cfg *config.Config, log *slog.Logger) (*devserver.Server, error) {
	host, port, err := splitHostPort(cfg.TemporalAddress)
	if err != nil {
		return nil, fmt.Errorf("temporal address: %w", err)
	}
	// The embedded server and its UI ask no credential of anyone, and anyone who reaches them can
	// read and end every team's workflows: they listen on the loopback only, which no sandbox
	// reaches (each has a network namespace of its own, and its egress refuses the host).
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%w: --temporal-address %s: the embedded Temporal server (and its UI) has no authentication and "+
			"listens on the loopback only (127.0.0.1 or ::1); a deployment whose Temporal other machines reach runs it with mTLS "+
			"or an authorizer (README, \"Running it in production\")", errUsage, cfg.TemporalAddress)
	}
	if port != 0 {
		if err := portFree(net.JoinHostPort(host, strconv.Itoa(port)), "Temporal", "--temporal-address 127.0.0.1:7234 (or PROCTOR_TEMPORAL_ADDRESS)"); err != nil {
			return nil, err
		}
	}
	if cfg.TemporalUIPort != 0 {
		if err := portFree(net.JoinHostPort(host, strconv.Itoa(cfg.TemporalUIPort)), "the Temporal UI", "--temporal-ui-port 8234 (or PROCTOR_TEMPORAL_UI_PORT)"); err != nil {
			return nil, err
		}
	}
	return devserver.Start(devserver.Options{
		DataDir:      filepath.Join(cfg.DataDir, "temporal"),
		IP:           host,
		FrontendPort: freeIfZero(port),
		UIPort:       freeIfZero(cfg.TemporalUIPort),
		Namespaces:   []string{cfg.TemporalNamespace},
		Logger:       log,
		Verbose:      cfg.LogLevel == "debug",
		// The UI decodes the encrypted payloads through the API's codec, as the signed-in owner.
		CodecEndpoint: cfg.PublicURL + "/codec",
	})
}

// stopEmbeddedTemporal stops dev's Temporal server, and says how long that took.
func stopEmbeddedTemporal(ts *devserver.Server, log *slog.Logger) {
	t := time.Now()
	ts.Stop()
	log.Info("temporal stopped", "took", time.Since(t).Round(time.Millisecond))
}

// devSecrets are dev's keys, kept in the data dir (made on first use): the key that signs
// object-storage URLs (unless --signing-key gives one), and the keyring that seals secrets.
func devSecrets(cfg *config.Config, log *slog.Logger) (*secrets.Keyring, error) {
	if cfg.SigningKey == "" {
		key, err := loadOrCreateSecret(filepath.Join(cfg.DataDir, "signing-key"))
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		cfg.SigningKey = key
	}
	return openSecrets(cfg, true, log)
}

// waitForWorkers waits (a minute at most) until a workflow has run through every queue: ready
// means that, not merely that ports are open.
func waitForWorkers(ctx context.Context, tc *ptemporal.Client, queues []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := tc.Ping(ctx, queues); err != nil {
		return fmt.Errorf("workers did not answer: %w", err)
	}
	return nil
}

// devKey is the dev member's API key, kept in the data dir before anything else can fail, so
// that an interrupted first start resumes with it; a key file lost since is replaced by a new
// key of the same member. firstStart says the store was empty (this start made the member).
func devKey(ctx context.Context, store *models.Store, dataDir string, log *slog.Logger) (info devInfo, firstStart bool, err error) {
	boot, err := store.BootstrapIfEmpty(ctx, "default", "Developer", "dev@localhost")
	if err != nil {
		return devInfo{}, false, err
	}
	if info, err = devCredentials(dataDir, boot); err != nil {
		return devInfo{}, false, err
	}
	if info.APIKey == "" {
		m, err := store.FirstOwner(ctx)
		if err != nil {
			return devInfo{}, false, fmt.Errorf("no member to give a key to (remove %s to start afresh): %w", dataDir, err)
		}
		_, token, err := store.CreateAPIKey(ctx, m.ID, "dev (recovered)")
		if err != nil {
			return devInfo{}, false, err
		}
		info = devInfo{APIKey: token, TeamID: m.TeamID.String(), MembershipID: m.ID}
		log.Warn("the key file was missing: made a new API key for the dev member", "file", filepath.Join(dataDir, credentialsFile))
	}
	info.DataDir = dataDir
	return info, boot != nil, writeDevCredentials(info)
}

// seedOnce deploys the examples and the demo taskset until a start completes it. The examples go
// through the build pipeline like any environment: this process's workers build and discover
// them (another's, when it polls no builds queue: seeding is then done at a later start).
func seedOnce(ctx context.Context, cfg *config.Config, store *models.Store, bucket blob.Bucket, tc *ptemporal.Client, apiKey string, log *slog.Logger) error {
	seededMark := filepath.Join(cfg.DataDir, "seeded")
	if _, err := os.Stat(seededMark); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	caller, err := store.AuthenticateAPIKey(ctx, apiKey)
	if err != nil {
		return fmt.Errorf("the key in %s: %w", filepath.Join(cfg.DataDir, credentialsFile), err)
	}
	wait := slices.Contains(cfg.QueueList(), names.QueueBuilds)
	done, err := seedExamples(ctx, store, bucket, tc, caller, wait, log)
	if err != nil {
		return fmt.Errorf("seed the example environments (the next start tries again): %w", err)
	}
	if !done {
		return nil
	}
	return os.WriteFile(seededMark, []byte("the example environments and the demo taskset are seeded\n"), 0o600)
}

// devCredentials returns the bootstrap key: from this start's bootstrap, or from the file an
// earlier start wrote.
func devCredentials(dataDir string, boot *models.Bootstrap) (devInfo, error) {
	if boot != nil {
		return devInfo{APIKey: boot.Token, TeamID: boot.Team.ID.String(), MembershipID: boot.Membership.ID}, nil
	}
	var info devInfo
	path := filepath.Join(dataDir, credentialsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		// The database predates the file (or it was removed): the key cannot be recovered.
		return info, nil
	}
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("read %s: %w", path, err)
	}
	return info, nil
}

// writeDevCredentials records the key with this start's addresses, readable by the owner only,
// in the data dir and, once the instance serves (info.APIURL set), in the user's config dir for
// client commands run from any directory.
func writeDevCredentials(info devInfo) error {
	if info.APIKey == "" {
		return nil
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	paths := []string{filepath.Join(info.DataDir, credentialsFile)}
	if user := userCredentialsPath(); user != "" && info.APIURL != "" {
		paths = append(paths, user)
	}
	for _, path := range paths {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := replaceFile(path, append(b, '\n')); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	return nil
}

// replaceFile writes b to path (mode 0600) through a temporary file of its own beside it, renamed
// over path: a reader never sees part of it, and instances that start at once (each writes the
// user's config dir) each replace the whole file.
func replaceFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name()) //nolint:errcheck // a failed write's temporary file
	}
	return err
}

// portFree checks that addr can be listened on (then lets it go).
func portFree(addr, what, how string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return busy(what, addr, how, err)
	}
	return l.Close()
}

// busy says that what cannot listen on addr, and how to pick another address.
func busy(what, addr, how string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s cannot listen on %s: the port is in use (another proctor dev?); stop that process, or choose another port with %s", what, addr, how)
	}
	return fmt.Errorf("%s cannot listen on %s: %w; choose another address with %s", what, addr, err, how)
}

func printBanner(w io.Writer, info devInfo, firstStart bool) {
	fmt.Fprintf(w, "\nProctor dev is ready (%.1fs)\n\n", info.StartupSeconds)
	fmt.Fprintf(w, "  App          %s/  (sign in with the API key below)\n", info.APIURL)
	fmt.Fprintf(w, "  API          %s/v2\n", info.APIURL)
	fmt.Fprintf(w, "  API docs     %s\n", info.DocsURL)
	fmt.Fprintf(w, "  OpenAPI      %s/openapi.json\n", info.APIURL)
	fmt.Fprintf(w, "  Temporal UI  %s\n", info.TemporalUIURL)
	fmt.Fprintf(w, "  Temporal     %s\n", info.TemporalAddress)
	fmt.Fprintf(w, "  Data         %s\n\n", info.DataDir)
	keyFile := filepath.Join(info.DataDir, credentialsFile)
	switch {
	case firstStart:
		fmt.Fprintf(w, "  API key (shown once; also saved, mode 0600, in %s):\n\n    %s\n\n", keyFile, info.APIKey)
	case info.APIKey != "":
		fmt.Fprintf(w, "  API key: in %s\n\n", keyFile)
	default:
		fmt.Fprintf(w, "  API key: %s is missing; create one with `proctor admin key create --membership 1`\n\n", keyFile)
	}
	fmt.Fprintf(w, "  Try:  curl -H \"Authorization: Bearer $KEY\" %s/v2/tasksets\n\n", info.APIURL)
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// freeIfZero maps the config's "0 = any free port" to the dev server's -1.
func freeIfZero(port int) int {
	if port == 0 {
		return -1
	}
	return port
}
