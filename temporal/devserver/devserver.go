// Package devserver runs a complete Temporal server (frontend, history, matching and worker services)
// inside the calling process, persisted to one SQLite file, plus the Temporal Web UI. It is what
// `proctor dev` uses so that nothing has to be installed or started by hand.
//
// This is the only package that imports go.temporal.io/server and the UI server: they are large and
// slow to compile, so only the proctor binary and its end-to-end tests link them. It may import
// nothing else of this module.
package devserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
)

const clusterName = "active"

// Options configure an embedded server. Zero values of the optional fields pick the defaults below.
type Options struct {
	// DataDir holds the SQLite file (temporal.db) and the persistent cluster id. Required.
	DataDir string
	// IP every service binds to. Default 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port clients and workers dial. Default 7233; 0 is replaced by the default,
	// use -1 for a free port.
	FrontendPort int
	// UIPort serves the Temporal Web UI. Default 8233; -1 for a free port; UI disabled when DisableUI.
	UIPort    int
	DisableUI bool
	// Namespaces registered at start (idempotent). Default ["default"].
	Namespaces []string
	// Logger receives the server's logs; only errors pass unless Verbose is set, because the server
	// warns about every connection its own services drop while they start and stop.
	Logger  *slog.Logger
	Verbose bool
	// CodecEndpoint, when set, is the payload codec server the UI decodes encrypted payloads
	// with (sending the browser's cookies with each request).
	CodecEndpoint string
}

// Server is a running embedded Temporal server.
type Server struct {
	server       temporal.Server
	ui           *uiserver.Server
	uiErr        chan error
	frontendAddr string
	uiAddr       string
}

// FrontendAddress is the host:port of the gRPC frontend.
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress is the host:port of the Web UI, empty when disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// Start sets up the schema on first use, registers the namespaces and starts every service. The
// returned server is ready for clients once Start returns.
func Start(opts Options) (*Server, error) {
	if opts.DataDir == "" {
		return nil, errors.New("devserver: DataDir is required")
	}
	if opts.IP == "" {
		opts.IP = "127.0.0.1"
	}
	if len(opts.Namespaces) == 0 {
		opts.Namespaces = []string{"default"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var err error
	anyFrontendPort := opts.FrontendPort < 0
	if opts.FrontendPort, err = pickPort(opts.IP, opts.FrontendPort, 7233); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("devserver: create data dir: %w", err)
	}
	clusterID, err := persistentClusterID(filepath.Join(opts.DataDir, "temporal-cluster-id"))
	if err != nil {
		return nil, err
	}

	sqlConf, err := sqlConfig(filepath.Join(opts.DataDir, "temporal.db"), opts.Namespaces)
	if err != nil {
		return nil, err
	}
	srv, err := buildWithRetries(&opts, anyFrontendPort, clusterID, sqlConf)
	if err != nil {
		return nil, err
	}
	s := &Server{server: srv, frontendAddr: net.JoinHostPort(opts.IP, strconv.Itoa(opts.FrontendPort))}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start: %w", err)
	}
	if !opts.DisableUI {
		if err := s.startUI(opts); err != nil {
			srv.Stop()
			return nil, err
		}
	}
	return s, nil
}

// buildWithRetries builds the server. The services' internal ports are picked free, then bound
// by the server a moment later; another process can take one in between (tests open many
// connections), so a bind failure is retried with fresh ports (and a fresh frontend port when
// any would do). The frontend's gRPC listener failing to bind is logged (our logger does not
// exit on Fatal) and then panics inside the server's construction: that panic is taken as the
// same failure.
func buildWithRetries(opts *Options, anyFrontendPort bool, clusterID string, sqlConf *config.SQL) (temporal.Server, error) {
	for try := 1; ; try++ {
		srv, err := buildServerRecovered(*opts, clusterID, sqlConf)
		if err == nil || try == 3 || !(errors.Is(err, errConstructionPanicked) || strings.Contains(err.Error(), "address already in use")) {
			return srv, err
		}
		opts.Logger.Warn("devserver: a picked port was taken; retrying with fresh ports", "error", err)
		if anyFrontendPort {
			if opts.FrontendPort, err = freePort(opts.IP); err != nil {
				return nil, err
			}
		}
	}
}

// startUI serves the Temporal UI. Its port is picked free (when asked) only now, right before it
// binds: the UI server exits the whole process on a bind failure (its logger's Fatal), so the
// window in which another process can take the port is kept to nothing.
func (s *Server) startUI(opts Options) error {
	var err error
	if opts.UIPort, err = pickPort(opts.IP, opts.UIPort, 8233); err != nil {
		return err
	}
	s.uiAddr = net.JoinHostPort(opts.IP, strconv.Itoa(opts.UIPort))
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                opts.IP,
		Port:                opts.UIPort,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    opts.Namespaces[0],
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		// The machine may have no route to the internet; the UI must not try.
		DisableNewsFetch: true,
		Codec:            uiconfig.Codec{Endpoint: opts.CodecEndpoint, IncludeCredentials: opts.CodecEndpoint != ""},
	}))
	s.uiErr = make(chan error, 1)
	// ui.Start blocks until Stop; another failure to serve comes back on uiErr.
	go func() { s.uiErr <- s.ui.Start() }()
	if err := waitListening(s.uiAddr, s.uiErr, 10*time.Second); err != nil {
		return fmt.Errorf("devserver: start UI on %s: %w", s.uiAddr, err)
	}
	return nil
}

// buildServer configures the Temporal services on fresh internal ports and builds them (binding
// their listeners).
func buildServer(opts Options, clusterID string, sqlConf *config.SQL) (temporal.Server, error) {
	conf, err := serverConfig(opts, clusterID, sqlConf)
	if err != nil {
		return nil, err
	}

	level := slog.LevelError
	if opts.Verbose {
		level = slog.LevelDebug
	}
	logger := newLogger(opts.Logger.With("component", "temporal"), level)
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("devserver: authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("devserver: claim mapper: %w", err)
	}
	hosts := map[primitives.ServiceName]static.Hosts{}
	for name, svc := range conf.Services {
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(opts.IP, strconv.Itoa(svc.RPC.GRPCPort)))
	}
	dyn := dynamicconfig.StaticClient{
		// The defaults are sized for clusters; one process serving a laptop needs less cache and
		// a higher visibility rate so the UI's list pages never throttle.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// With one history shard, the transfer queue (which dispatches every workflow task and
		// every activity that is not eagerly started) is read at most this often: the default
		// of 20 makes each dispatch wait ~45 ms for the next read.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():    1000,
		// One partition per task queue: on a single host, more partitions only make a poll and
		// a task meet later (forwarding between partitions).
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
	}
	srv, err := temporal.NewServer(
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	)
	if err != nil {
		return nil, fmt.Errorf("devserver: build server: %w", err)
	}
	return srv, nil
}

// errConstructionPanicked marks a server whose construction panicked.
var errConstructionPanicked = errors.New("the server's construction panicked")

// buildServerRecovered is buildServer with a panic of the server's construction returned as an
// error wrapping errConstructionPanicked.
func buildServerRecovered(opts Options, clusterID string, sqlConf *config.SQL) (srv temporal.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			srv, err = nil, fmt.Errorf("devserver: build server: %w: %v", errConstructionPanicked, r)
		}
	}()
	return buildServer(opts, clusterID, sqlConf)
}

// Stop stops the UI and every Temporal service. It blocks until they are down.
func (s *Server) Stop() {
	if s.ui != nil {
		s.ui.Stop()
		<-s.uiErr
	}
	s.server.Stop()
}

func sqlConfig(dbFile string, namespaces []string) (*config.SQL, error) {
	conf := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbFile,
		// The plugin turns every attribute it does not know as a URI parameter into a PRAGMA, so
		// these are pragma names without the driver's "_" prefix (a "_journal_mode" attribute
		// becomes a pragma SQLite ignores, leaving a rollback journal with synchronous=FULL).
		ConnectAttributes: connectAttributes(),
	}
	_, statErr := os.Stat(dbFile)
	if statErr != nil && !errors.Is(statErr, os.ErrNotExist) {
		return nil, fmt.Errorf("devserver: stat %s: %w", dbFile, statErr)
	}
	// Only the owner may read the workflow histories (SQLite gives its WAL and shared-memory
	// files the database file's mode).
	f, err := os.OpenFile(dbFile, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devserver: create %s: %w", dbFile, err)
	}
	f.Close()
	if err := os.Chmod(dbFile, 0o600); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, fmt.Errorf("devserver: set up schema in %s: %w", dbFile, err)
		}
	}
	nsConfigs := make([]*sqliteschema.NamespaceConfig, 0, len(namespaces))
	for _, ns := range namespaces {
		c, err := sqliteschema.NewNamespaceConfig(clusterName, ns, false, nil)
		if err != nil {
			return nil, fmt.Errorf("devserver: namespace %s: %w", ns, err)
		}
		nsConfigs = append(nsConfigs, c)
	}
	if err := sqliteschema.CreateNamespaces(conf, nsConfigs...); err != nil {
		return nil, fmt.Errorf("devserver: create namespaces: %w", err)
	}
	return conf, nil
}

// connectAttributes are the SQLite settings of the server's store. WAL keeps readers (the UI's list
// pages) from blocking the history service's writes, and with WAL synchronous=NORMAL is durable
// against a crash of the process (only a power loss can drop the last commits); together they
// more than double the workflows a laptop runs per second. busy_timeout covers a checkpoint that
// holds the lock for a moment.
func connectAttributes() map[string]string {
	return map[string]string{
		"mode":         "rwc",
		"journal_mode": "wal",
		"synchronous":  "normal",
		"busy_timeout": "10000",
	}
}

func serverConfig(opts Options, clusterID string, sqlConf *config.SQL) (*config.Config, error) {
	httpPort, err := freePort(opts.IP)
	if err != nil {
		return nil, err
	}
	frontendAddr := net.JoinHostPort(opts.IP, strconv.Itoa(opts.FrontendPort))
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = opts.IP
	conf.Persistence.DefaultStore = "sqlite-default"
	conf.Persistence.VisibilityStore = "sqlite-default"
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{"sqlite-default": {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				HTTPAddress:            net.JoinHostPort(opts.IP, strconv.Itoa(httpPort)),
				ClusterID:              clusterID,
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{}
	for _, name := range []string{"frontend", "history", "matching", "worker"} {
		var svc config.Service
		svc.RPC.BindOnIP = opts.IP
		if name == "frontend" {
			svc.RPC.GRPCPort = opts.FrontendPort
			svc.RPC.HTTPPort = httpPort
		} else if svc.RPC.GRPCPort, err = freePort(opts.IP); err != nil {
			return nil, err
		}
		conf.Services[name] = svc
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = frontendAddr
	return &conf, nil
}

// persistentClusterID keeps the cluster id stable across restarts: the SQLite file records it, and a
// server started with another id over the same file refuses to start.
func persistentClusterID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("devserver: read cluster id: %w", err)
	}
	id := uuid.NewString()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("devserver: write cluster id: %w", err)
	}
	return id, nil
}

func pickPort(ip string, port, def int) (int, error) {
	switch {
	case port == 0:
		return def, nil
	case port < 0:
		return freePort(ip)
	default:
		return port, nil
	}
}

func waitListening(addr string, errc <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-errc:
			if err == nil {
				err = errors.New("stopped before listening")
			}
			return err
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
