// Package config is the one configuration struct of every proctor process, read from command-line
// flags and PROCTOR_* environment variables (a flag wins over its variable). Defaults make `proctor
// dev` work with nothing set. It imports the standard library only.
package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/proctorhq/proctor/workflows/names"
)

// Config is every setting of the platform's processes; each command reads the fields it needs.
type Config struct {
	// DataDir holds dev-mode state: the SQLite database, the Temporal database, local object
	// storage, the signing key and the printed credentials.
	DataDir string
	// DatabaseURL: postgres://… in production, sqlite:PATH for the embedded store.
	DatabaseURL string
	// BlobURL: gs://bucket[/prefix] in production, file:///abs/dir for a local directory.
	BlobURL string
	// HTTPAddr is where the API listens.
	HTTPAddr string
	// PublicURL is how clients reach the API (used in signed URLs and links).
	PublicURL string
	// TemporalAddress is the Temporal frontend (host:port).
	TemporalAddress string
	// TemporalNamespace is the namespace every workflow runs in.
	TemporalNamespace string
	// TemporalUIPort serves the Temporal Web UI in dev mode.
	TemporalUIPort int
	// SigningKey signs local object-storage URLs (HMAC); dev mode generates and keeps one.
	SigningKey string
	// Queues lists the task queues a worker polls.
	Queues string
	// LogLevel is debug, info, warn or error; LogFormat is text or json.
	LogLevel  string
	LogFormat string
	// SessionTTL is the lifetime of a browser session.
	SessionTTL time.Duration
	// MaxBodyBytes bounds API request bodies.
	MaxBodyBytes int64
	// MaxJobAttempts bounds the attempts one launch request may create.
	MaxJobAttempts int
	// ShutdownTimeout bounds a graceful stop.
	ShutdownTimeout time.Duration
	// HTTPReadTimeout bounds reading a whole request, body included; HTTPWriteTimeout bounds
	// answering it; HTTPIdleTimeout closes a keep-alive connection with no request; HTTPMaxConns
	// caps the connections served at once (past seven eighths of it, idle keep-alive connections
	// are closed oldest first; past it, a small reserve serves only health probes and the rest
	// wait in the listen backlog); HTTPMaxConnsPerAddr caps those from one remote address (past
	// it, a new connection is closed at once; 0: no cap).
	HTTPReadTimeout     time.Duration
	HTTPWriteTimeout    time.Duration
	HTTPIdleTimeout     time.Duration
	HTTPMaxConns        int
	HTTPMaxConnsPerAddr int
	// HTTPBodyBytesInFlight bounds the request bodies the API buffers at once (a body weighs
	// twice its length: read, then decoded); HTTPBodyStreams bounds the form uploads it receives
	// at once; HTTPBodyMinRate is the slowest, in bytes a second after a 5 s grace, a body may
	// arrive (slower: 408).
	HTTPBodyBytesInFlight int64
	HTTPBodyStreams       int
	HTTPBodyMinRate       int64
	// BuildDir holds build work dirs and the unpacked images sandboxes run; BuildGOPROXY is the
	// module proxy Go builds use (empty: the worker's GOPROXY).
	BuildDir     string
	BuildGOPROXY string
	// BuildCacheDir keeps Go builds' images for identical sources (activities.BuildCache):
	// default <user cache dir>/proctor/builds; "off" keeps none.
	BuildCacheDir string
	// BuildEnvServerDir is the envserver module (a directory) Go builds supply to a source that
	// requires it without carrying it (empty: the envserver of the checkout this process runs
	// from, if any).
	BuildEnvServerDir string
	// BuildMaxSourceBytes and BuildMaxSourceEntries bound an uploaded source once unpacked;
	// MaxUploadBytes bounds one PUT through a file:// bucket's signed URL (GCS takes what its
	// own limits allow).
	BuildMaxSourceBytes   int64
	BuildMaxSourceEntries int
	MaxUploadBytes        int64
	// SandboxRoot holds sandboxes' work dirs; MaxSandboxes bounds those live on this host;
	// SandboxIsolation is auto, bubblewrap or none.
	SandboxRoot      string
	MaxSandboxes     int
	SandboxIsolation string
	// SandboxMaxProcesses bounds one sandbox's processes and threads, SandboxMaxOpenFiles each of
	// its processes' open files (0: the providers' defaults).
	SandboxMaxProcesses int
	SandboxMaxOpenFiles int
	// SandboxUnenforcedLimits is what a worker does with an attempt that declares a limit its
	// sandboxes cannot enforce on this host: warn (run it, saying so in its log) or refuse.
	SandboxUnenforcedLimits string
	// SandboxRunAs is the host user id a root worker's bubblewrap sandboxes run as, each in a
	// user namespace of its own (0: sandbox.DefaultRunAs; -1: root).
	SandboxRunAs int
	// SandboxProvider is process (each sandbox a child process of the worker, running an image's
	// unpacked root file system under bubblewrap) or container (each sandbox a container of the
	// Docker Engine API server at ContainerHost; ContainerOwner labels this worker's containers).
	SandboxProvider string
	// MetricsAddr, when set, serves /metrics on a listener of its own (workers have no other):
	// keep it where only the operator's scraper reaches it. MetricsToken, when set, is the
	// bearer token /metrics asks for (on the API listener it is served only with one).
	MetricsAddr  string
	MetricsToken string
	// OTLPEndpoint, when set, is the OpenTelemetry collector (OTLP over gRPC) traces go to.
	OTLPEndpoint   string
	ContainerHost  string
	ContainerOwner string
	// AgentRelay is a static proctor-relay binary (cmd/proctor-relay) the container provider
	// mounts into a brought agent's container, the kubernetes provider adds to its image, and the
	// process provider of a worker that is not root runs in its sandbox, to give it its endpoints.
	AgentRelay string
	// ShellServer is the static proctor-shell binary (cmd/proctor-shell) build workers add to the
	// images of builds that ask for it (Harbor tasks).
	ShellServer string
	// The kubernetes provider runs each sandbox as a pod in KubeNamespace (of the cluster in
	// Kubeconfig, or the one it runs in), pulling images the workers push to KubeRegistry.
	Kubeconfig          string
	KubeNamespace       string
	KubeRegistry        string
	KubeNodeSelector    string
	KubeGPUNodeSelector string
	KubeImagePullSecret string
	// KubeUserNamespaces runs sandbox pods in user namespaces of their own (hostUsers: false).
	KubeUserNamespaces bool
	// GPUs are the device ids this host hands to sandboxes (comma-separated), all of GPUType;
	// a worker with GPUs also polls the sandboxes-gpu-<type> queue.
	GPUs    string
	GPUType string
	// TemporalUIOrigin is the Temporal Web UI's origin that may decode payloads through the
	// server's /codec/ endpoint (production; dev sets its own UI).
	TemporalUIOrigin string
	// The rate card of environment time: a sandbox's hourly rate is EnvironmentHourlyRate plus
	// its requested CPUs, GiB of memory and GPUs (by type, "h100=4.5,*=2") at their rates, fixed
	// when it starts; each is charged at least EnvironmentBaselineMinutes. Read by workers.
	EnvironmentHourlyRate      float64
	EnvironmentCPUHourlyRate   float64
	EnvironmentMemoryGBRate    float64
	EnvironmentGPURates        string
	EnvironmentBaselineMinutes float64
	// UploadMaxBytes, UploadPartBytes and UploadAllowedTypes bound task attachments.
	UploadMaxBytes     int64
	UploadPartBytes    int64
	UploadAllowedTypes string
	// DataTeamBytes, DataFileBytes and DataTeamFiles bound each team's data files (0: no bound).
	DataTeamBytes int64
	DataFileBytes int64
	DataTeamFiles int
	// SMTPURL and MailFrom send spending alerts; LimitAlertInterval is how often alert limits
	// are checked.
	SMTPURL            string
	MailFrom           string
	LimitAlertInterval time.Duration
	// SecretsKMSURI names a Google Cloud KMS key (gcp-kms://projects/…/cryptoKeys/…) that is the
	// key-encryption key instead of a keyset file.
	SecretsKMSURI string
	// SecretsKeyFile is the key-encryption keyset (a Tink JSON keyset, mode 0600) that seals
	// secrets at rest; servers and workers share it. Dev generates one in the data dir.
	SecretsKeyFile string
	// MaxTries bounds how often an attempt restarts in a fresh sandbox after an infrastructure
	// failure (sandbox lost, worker died).
	MaxTries int
	// StepsPerRun is how many agent steps one workflow run of an attempt holds before it
	// continues as new (0: the workflow's default, 500): lower keeps each run's history smaller.
	StepsPerRun int
}

// Defaults returns the settings used when neither a flag nor a variable says otherwise.
func Defaults() Config {
	return Config{
		DataDir:           ".proctor",
		HTTPAddr:          "127.0.0.1:8080",
		TemporalAddress:   "127.0.0.1:7233",
		TemporalNamespace: "default",
		TemporalUIPort:    8233,
		Queues:            "proctor-workflows,sandboxes-cpu,builds",
		LogLevel:          "info",
		LogFormat:         "text",
		SessionTTL:        7 * 24 * time.Hour,
		MaxBodyBytes:      10 << 20,
		MaxJobAttempts:    100_000,
		ShutdownTimeout:   10 * time.Second,
		HTTPReadTimeout:   time.Minute,
		HTTPWriteTimeout:  2 * time.Minute,
		HTTPIdleTimeout:   2 * time.Minute,
		HTTPMaxConns:      4096,
		// Enough for a browser (6 per origin) or a busy SDK pool; behind a proxy every client
		// shares its address, so raise it there (or 0).
		HTTPMaxConnsPerAddr:   256,
		HTTPBodyBytesInFlight: 64 << 20,
		HTTPBodyStreams:       4,
		HTTPBodyMinRate:       16 << 10,
	}
}

// Bind registers every field on fs with its PROCTOR_* variable as the default, so that `--help`
// documents both. Call fs.Parse afterwards, then Finish.
func (c *Config) Bind(fs *flag.FlagSet) {
	d := Defaults()
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, envOr(env, def), fmt.Sprintf("%s (env %s)", usage, env))
	}
	str(&c.DataDir, "data-dir", "PROCTOR_DATA_DIR", d.DataDir, "directory for dev-mode state")
	str(&c.DatabaseURL, "database-url", "PROCTOR_DATABASE_URL", "", "database: postgres://user:pass@host/db or sqlite:PATH (dev default: sqlite:<data-dir>/proctor.db)")
	str(&c.BlobURL, "blob-url", "PROCTOR_BLOB_URL", "", "object storage: gs://bucket[/prefix] or file:///abs/dir (dev default: file://<data-dir>/blobs)")
	str(&c.HTTPAddr, "http-addr", "PROCTOR_HTTP_ADDR", d.HTTPAddr, "address the API listens on")
	str(&c.PublicURL, "public-url", "PROCTOR_PUBLIC_URL", "", "URL clients reach the API at (default: http://<http-addr>)")
	str(&c.TemporalAddress, "temporal-address", "PROCTOR_TEMPORAL_ADDRESS", d.TemporalAddress, "Temporal frontend host:port (dev: where the embedded server listens)")
	str(&c.TemporalNamespace, "temporal-namespace", "PROCTOR_TEMPORAL_NAMESPACE", d.TemporalNamespace, "Temporal namespace")
	fs.IntVar(&c.TemporalUIPort, "temporal-ui-port", envInt("PROCTOR_TEMPORAL_UI_PORT", d.TemporalUIPort), "port of the Temporal Web UI in dev mode (env PROCTOR_TEMPORAL_UI_PORT)")
	str(&c.SigningKey, "signing-key", "PROCTOR_SIGNING_KEY", "", "HMAC key for local object-storage URLs (dev: generated and kept in the data dir)")
	str(&c.Queues, "queues", "PROCTOR_QUEUES", d.Queues, "comma-separated task queues this worker polls")
	str(&c.LogLevel, "log-level", "PROCTOR_LOG_LEVEL", d.LogLevel, "debug, info, warn or error")
	str(&c.LogFormat, "log-format", "PROCTOR_LOG_FORMAT", d.LogFormat, "text or json")
	fs.DurationVar(&c.SessionTTL, "session-ttl", envDuration("PROCTOR_SESSION_TTL", d.SessionTTL), "browser session lifetime (env PROCTOR_SESSION_TTL)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", int64(envInt("PROCTOR_MAX_BODY_BYTES", int(d.MaxBodyBytes))), "largest accepted request body (env PROCTOR_MAX_BODY_BYTES)")
	fs.IntVar(&c.MaxJobAttempts, "max-job-attempts", envInt("PROCTOR_MAX_JOB_ATTEMPTS", d.MaxJobAttempts), "most attempts one run_list request may launch (env PROCTOR_MAX_JOB_ATTEMPTS)")
	str(&c.BuildDir, "build-dir", "PROCTOR_BUILD_DIR", "", "directory for builds and unpacked images (dev default: <data-dir>/builds; else a temp dir)")
	str(&c.BuildCacheDir, "build-cache-dir", "PROCTOR_BUILD_CACHE_DIR", "", "where a build worker keeps the images of Go builds, reused by a build of the same source, options and toolchain (default: <user cache dir>/proctor/builds; off: none)")
	str(&c.BuildGOPROXY, "build-goproxy", "PROCTOR_BUILD_GOPROXY", "", "module proxy Go environment builds use, or off for vendored sources only (default: the worker's GOPROXY)")
	str(&c.BuildEnvServerDir, "build-envserver-dir", "PROCTOR_BUILD_ENVSERVER_DIR", "", "the envserver module (a directory) Go builds supply to a source that requires it without vendoring it (default: the checkout's envserver when run from one)")
	fs.Int64Var(&c.BuildMaxSourceBytes, "build-max-source-bytes", int64(envInt("PROCTOR_BUILD_MAX_SOURCE_BYTES", 1<<30)), "most bytes an uploaded source may unpack to; more fails the build (env PROCTOR_BUILD_MAX_SOURCE_BYTES)")
	fs.IntVar(&c.BuildMaxSourceEntries, "build-max-source-entries", envInt("PROCTOR_BUILD_MAX_SOURCE_ENTRIES", 200_000), "most files, folders and links an uploaded source may hold (env PROCTOR_BUILD_MAX_SOURCE_ENTRIES)")
	fs.Int64Var(&c.MaxUploadBytes, "max-upload-bytes", int64(envInt("PROCTOR_MAX_UPLOAD_BYTES", 0)), "largest PUT through a file:// bucket's signed URL; 0 = 5 GiB (env PROCTOR_MAX_UPLOAD_BYTES)")
	str(&c.SandboxRoot, "sandbox-root", "PROCTOR_SANDBOX_ROOT", "", "directory for sandbox work dirs (dev default: <data-dir>/sandboxes)")
	fs.IntVar(&c.MaxSandboxes, "max-sandboxes", envInt("PROCTOR_MAX_SANDBOXES", 0), "sandboxes live at once on this host; 0 = 4 per CPU (env PROCTOR_MAX_SANDBOXES)")
	fs.IntVar(&c.SandboxMaxProcesses, "sandbox-max-processes", envInt("PROCTOR_SANDBOX_MAX_PROCESSES", 0),
		"processes and threads one sandbox may run (cgroup pids.max, the engine's pids limit, or RLIMIT_NPROC); 0 = 4096 (env PROCTOR_SANDBOX_MAX_PROCESSES)")
	fs.IntVar(&c.SandboxMaxOpenFiles, "sandbox-max-open-files", envInt("PROCTOR_SANDBOX_MAX_OPEN_FILES", 0),
		"open files each process of a bubblewrap sandbox may hold (RLIMIT_NOFILE); 0 = 8192 (env PROCTOR_SANDBOX_MAX_OPEN_FILES)")
	str(&c.SandboxUnenforcedLimits, "sandbox-unenforced-limits", "PROCTOR_SANDBOX_UNENFORCED_LIMITS", "warn",
		"an attempt declaring a limit this host's sandboxes cannot enforce (cpu without the cgroup cpu controller, say): warn (run it, saying so in its environment log) or refuse")
	fs.IntVar(&c.SandboxRunAs, "sandbox-run-as", envInt("PROCTOR_SANDBOX_RUN_AS", 0),
		"host user id a root worker's bubblewrap sandboxes run as, each in a user namespace of its own; no account may have it; 0 = 60001, -1 = root (env PROCTOR_SANDBOX_RUN_AS)")
	str(&c.SandboxIsolation, "sandbox-isolation", "PROCTOR_SANDBOX_ISOLATION", "auto", "auto (bubblewrap when installed), bubblewrap, or none")
	str(&c.SandboxProvider, "sandbox-provider", "PROCTOR_SANDBOX_PROVIDER", "process", "process (child processes under bubblewrap), container (a Docker Engine API server: Docker, or podman system service) or kubernetes (a pod per sandbox)")
	str(&c.ContainerHost, "container-host", "PROCTOR_CONTAINER_HOST", "", "the container provider's engine, e.g. unix:///run/podman/podman.sock (default: DOCKER_HOST, else the engine's default socket)")
	str(&c.AgentRelay, "agent-relay", "PROCTOR_AGENT_RELAY", "", "the static proctor-relay binary that gives a brought agent its endpoints in a container, a pod, or a process sandbox of a worker that is not root (default: proctor-relay beside this binary, when there is one; without, the container and kubernetes providers refuse such agents, and a process worker that is not root runs them on its network)")
	str(&c.ShellServer, "shell-server", "PROCTOR_SHELL_SERVER", "", "the static proctor-shell binary build workers add to the images of builds that ask for the shell server (Harbor tasks; default: proctor-shell beside this binary, when there is one; without, such builds fail, saying so)")
	str(&c.ContainerOwner, "container-owner", "PROCTOR_CONTAINER_OWNER", "", "labels this worker's containers or pods; at start the worker removes those of its owner left by a crash, so workers sharing an engine or namespace need distinct owners (default: the host name)")
	str(&c.Kubeconfig, "kubeconfig", "PROCTOR_KUBECONFIG", "", "the kubernetes provider's cluster (default: the cluster the worker runs in, with its service account)")
	str(&c.KubeNamespace, "kube-namespace", "PROCTOR_KUBE_NAMESPACE", "", "namespace of the sandbox pods (default: the worker's own namespace)")
	str(&c.KubeRegistry, "kube-registry", "PROCTOR_KUBE_REGISTRY", "", "repository the kubernetes provider pushes environment images to and pods pull from, e.g. registry.example.com/proctor/envs (credentials: the Docker config)")
	str(&c.KubeImagePullSecret, "kube-image-pull-secret", "PROCTOR_KUBE_IMAGE_PULL_SECRET", "", "a Secret (type kubernetes.io/dockerconfigjson) in the sandbox namespace that pods pull --kube-registry's images with")
	fs.BoolVar(&c.KubeUserNamespaces, "kube-user-namespaces", envBool("PROCTOR_KUBE_USER_NAMESPACES"),
		"run each sandbox pod in a user namespace of its own (hostUsers: false), its root an unprivileged user of the node; the cluster must support user namespaces (Kubernetes 1.33+)")
	str(&c.KubeNodeSelector, "kube-node-selector", "PROCTOR_KUBE_NODE_SELECTOR", "", "node labels every sandbox pod selects, e.g. pool=sandboxes,zone=a")
	str(&c.KubeGPUNodeSelector, "kube-gpu-node-selector", "PROCTOR_KUBE_GPU_NODE_SELECTOR", "", "node labels sandbox pods with GPUs also select, e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3")
	str(&c.TemporalUIOrigin, "temporal-ui-origin", "PROCTOR_TEMPORAL_UI_ORIGIN", "", "origin of a Temporal Web UI allowed to decode encrypted payloads through /codec/ (configure the UI's codec endpoint as <public-url>/codec with includeCredentials)")
	fs.Float64Var(&c.EnvironmentHourlyRate, "environment-hourly-rate", envFloat("PROCTOR_ENVIRONMENT_HOURLY_RATE", 0), "USD per hour of every sandbox, before its resources' rates (env PROCTOR_ENVIRONMENT_HOURLY_RATE)")
	fs.Float64Var(&c.EnvironmentCPUHourlyRate, "environment-cpu-hourly-rate", envFloat("PROCTOR_ENVIRONMENT_CPU_HOURLY_RATE", 0), "USD per hour of each CPU a sandbox asks for (env PROCTOR_ENVIRONMENT_CPU_HOURLY_RATE)")
	fs.Float64Var(&c.EnvironmentMemoryGBRate, "environment-memory-gb-hourly-rate", envFloat("PROCTOR_ENVIRONMENT_MEMORY_GB_HOURLY_RATE", 0), "USD per hour of each GiB of memory a sandbox asks for (env PROCTOR_ENVIRONMENT_MEMORY_GB_HOURLY_RATE)")
	str(&c.EnvironmentGPURates, "environment-gpu-hourly-rates", "PROCTOR_ENVIRONMENT_GPU_HOURLY_RATES", "", "USD per hour of one GPU by type, e.g. h100=4.5,a10g=1.2,*=2 (* for types not named)")
	fs.Float64Var(&c.EnvironmentBaselineMinutes, "environment-baseline-minutes", envFloat("PROCTOR_ENVIRONMENT_BASELINE_MINUTES", 5), "minutes every sandbox that started is charged at least (env PROCTOR_ENVIRONMENT_BASELINE_MINUTES)")
	fs.Int64Var(&c.UploadMaxBytes, "upload-max-bytes", int64(envInt("PROCTOR_UPLOAD_MAX_BYTES", 0)), "the largest task attachment; 0 = 5 GiB (env PROCTOR_UPLOAD_MAX_BYTES)")
	fs.Int64Var(&c.UploadPartBytes, "upload-part-bytes", int64(envInt("PROCTOR_UPLOAD_PART_BYTES", 0)), "the part size of multipart attachment uploads; larger files are multipart; 0 = 64 MiB (env PROCTOR_UPLOAD_PART_BYTES)")
	str(&c.UploadAllowedTypes, "upload-allowed-types", "PROCTOR_UPLOAD_ALLOWED_TYPES", "", "the media types task attachments may have, e.g. application/pdf,image/*,text/* (default: any)")
	fs.Int64Var(&c.DataTeamBytes, "data-team-quota-bytes", int64(envInt("PROCTOR_DATA_TEAM_QUOTA_BYTES", 10<<30)), "what one team's data files may take in all; 0 = no bound (env PROCTOR_DATA_TEAM_QUOTA_BYTES)")
	fs.Int64Var(&c.DataFileBytes, "data-max-file-bytes", int64(envInt("PROCTOR_DATA_MAX_FILE_BYTES", 1<<30)), "the largest data file; 0 = no bound (env PROCTOR_DATA_MAX_FILE_BYTES)")
	fs.IntVar(&c.DataTeamFiles, "data-team-max-files", envInt("PROCTOR_DATA_TEAM_MAX_FILES", 10000), "how many data files one team may have; 0 = no bound (env PROCTOR_DATA_TEAM_MAX_FILES)")
	str(&c.SMTPURL, "smtp-url", "PROCTOR_SMTP_URL", "", "SMTP server for spending alerts: smtp://[user:password@]host[:port] (STARTTLS when offered) or smtps://… (alerts wait, logged, without one)")
	str(&c.MailFrom, "mail-from", "PROCTOR_MAIL_FROM", "proctor@localhost", "sender of spending alerts")
	fs.DurationVar(&c.LimitAlertInterval, "limit-alert-interval", envDuration("PROCTOR_LIMIT_ALERT_INTERVAL", time.Minute), "how often alert limits are checked (env PROCTOR_LIMIT_ALERT_INTERVAL)")
	str(&c.SecretsKMSURI, "secrets-kms-uri", "PROCTOR_SECRETS_KMS_URI", "", "a Google Cloud KMS key (gcp-kms://projects/P/locations/L/keyRings/R/cryptoKeys/K) that wraps the secrets' data keys, instead of --secrets-key-file; credentials from the environment (ADC)")
	str(&c.SecretsKeyFile, "secrets-key-file", "PROCTOR_SECRETS_KEY_FILE", "", "key-encryption keyset that seals secrets at rest, shared by servers and workers; create with `proctor admin keys create` (dev default: <data-dir>/secrets-key.json, generated)")
	fs.IntVar(&c.MaxTries, "max-tries", envInt("PROCTOR_MAX_TRIES", 3), "tries of an attempt after infrastructure failures (env PROCTOR_MAX_TRIES)")
	fs.IntVar(&c.StepsPerRun, "steps-per-run", envInt("PROCTOR_STEPS_PER_RUN", 0), "agent steps one workflow run of an attempt holds before it continues as new; 0: 500 (env PROCTOR_STEPS_PER_RUN)")
	str(&c.MetricsAddr, "metrics-addr", "PROCTOR_METRICS_ADDR", "", "address of a listener of its own for Prometheus /metrics, e.g. :9464: a worker's, or the API server's (whose --http-addr serves /metrics only with --metrics-token)")
	str(&c.MetricsToken, "metrics-token", "PROCTOR_METRICS_TOKEN", "", "bearer token /metrics asks for; the API listener serves /metrics only with one set (metrics name every team's models and spend)")
	str(&c.OTLPEndpoint, "otlp-endpoint", "PROCTOR_OTLP_ENDPOINT", "", "OpenTelemetry collector that receives traces over OTLP/gRPC, e.g. http://otel-collector:4317 (https: TLS); batching follows the OTEL_BSP_* variables")
	str(&c.GPUs, "gpus", "PROCTOR_GPUS", "", "comma-separated GPU device ids this host hands to sandboxes")
	str(&c.GPUType, "gpu-type", "PROCTOR_GPU_TYPE", "", "the type of those GPUs, e.g. h100 (names the sandboxes-gpu-<type> queue)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", envDuration("PROCTOR_SHUTDOWN_TIMEOUT", d.ShutdownTimeout), "bound on a graceful stop (env PROCTOR_SHUTDOWN_TIMEOUT)")
	fs.DurationVar(&c.HTTPReadTimeout, "http-read-timeout", envDuration("PROCTOR_HTTP_READ_TIMEOUT", d.HTTPReadTimeout), "bound on reading a whole request, body included (env PROCTOR_HTTP_READ_TIMEOUT)")
	fs.DurationVar(&c.HTTPWriteTimeout, "http-write-timeout", envDuration("PROCTOR_HTTP_WRITE_TIMEOUT", d.HTTPWriteTimeout), "bound on writing a response (env PROCTOR_HTTP_WRITE_TIMEOUT)")
	fs.DurationVar(&c.HTTPIdleTimeout, "http-idle-timeout", envDuration("PROCTOR_HTTP_IDLE_TIMEOUT", d.HTTPIdleTimeout), "an idle keep-alive connection is closed after this (env PROCTOR_HTTP_IDLE_TIMEOUT)")
	fs.IntVar(&c.HTTPMaxConns, "http-max-conns", envInt("PROCTOR_HTTP_MAX_CONNS", d.HTTPMaxConns), "connections served at once; near it idle keep-alive connections are closed first, past it only health probes are answered and more wait to be accepted (env PROCTOR_HTTP_MAX_CONNS)")
	fs.IntVar(&c.HTTPMaxConnsPerAddr, "http-max-conns-per-addr", envInt("PROCTOR_HTTP_MAX_CONNS_PER_ADDR", d.HTTPMaxConnsPerAddr), "connections from one client address at once; past it a new one is closed at once, 0 for no cap; raise it behind a proxy, whose clients share its address (env PROCTOR_HTTP_MAX_CONNS_PER_ADDR)")
	fs.Int64Var(&c.HTTPBodyBytesInFlight, "http-body-bytes-in-flight", int64(envInt("PROCTOR_HTTP_BODY_BYTES_IN_FLIGHT", int(d.HTTPBodyBytesInFlight))), "request bodies buffered at once, in bytes (a body weighs twice its length), one caller's at most half; past it a request waits up to 10 s, then 503 (env PROCTOR_HTTP_BODY_BYTES_IN_FLIGHT)")
	fs.IntVar(&c.HTTPBodyStreams, "http-body-streams", envInt("PROCTOR_HTTP_BODY_STREAMS", d.HTTPBodyStreams), "form uploads received at once (each streamed to a temporary file), one caller's at most half; past it a request waits up to 10 s, then 503 (env PROCTOR_HTTP_BODY_STREAMS)")
	fs.Int64Var(&c.HTTPBodyMinRate, "http-body-min-rate", int64(envInt("PROCTOR_HTTP_BODY_MIN_RATE", int(d.HTTPBodyMinRate))), "slowest a request body may arrive, in bytes a second on average after a 5 s grace; slower is answered 408 (env PROCTOR_HTTP_BODY_MIN_RATE)")
}

// FillDevDefaults points the database and object storage into the data directory where they were
// not given, and makes the data directory absolute.
func (c *Config) FillDevDefaults() error {
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = abs
	if c.DatabaseURL == "" {
		c.DatabaseURL = "sqlite:" + filepath.Join(abs, "proctor.db")
	}
	if c.BlobURL == "" {
		c.BlobURL = "file://" + filepath.Join(abs, "blobs")
	}
	if c.SandboxRoot == "" {
		c.SandboxRoot = filepath.Join(abs, "sandboxes")
	}
	if c.BuildDir == "" {
		c.BuildDir = filepath.Join(abs, "builds")
	}
	if c.SecretsKeyFile == "" && c.SecretsKMSURI == "" {
		c.SecretsKeyFile = filepath.Join(abs, "secrets-key.json")
	}
	return c.finish()
}

// RequireProduction checks that the settings a production process cannot default are present.
func (c *Config) RequireProduction(needBlob bool) error {
	var missing []string
	if c.DatabaseURL == "" {
		missing = append(missing, "PROCTOR_DATABASE_URL (--database-url)")
	}
	if needBlob && c.BlobURL == "" {
		missing = append(missing, "PROCTOR_BLOB_URL (--blob-url)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing configuration: %s", strings.Join(missing, ", "))
	}
	return c.finish()
}

func (c *Config) finish() error {
	if c.BuildDir == "" {
		c.BuildDir = filepath.Join(os.TempDir(), "proctor-builds")
	}
	if c.BuildCacheDir == "" {
		if dir, err := os.UserCacheDir(); err == nil {
			c.BuildCacheDir = filepath.Join(dir, "proctor", "builds")
		} else {
			c.BuildCacheDir = filepath.Join(os.TempDir(), "proctor-build-cache")
		}
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.HTTPAddr
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	switch c.LogFormat {
	case "text", "json":
	default:
		return fmt.Errorf("log format must be text or json, not %q", c.LogFormat)
	}
	if c.EnvironmentHourlyRate < 0 || c.EnvironmentCPUHourlyRate < 0 || c.EnvironmentMemoryGBRate < 0 || c.EnvironmentBaselineMinutes < 0 {
		return errors.New("environment-hourly-rate, environment-cpu-hourly-rate, environment-memory-gb-hourly-rate and environment-baseline-minutes must not be negative")
	}
	if c.UploadMaxBytes < 0 || c.UploadPartBytes < 0 || (c.UploadPartBytes > 0 && c.UploadPartBytes < 5<<20) {
		return errors.New("upload-max-bytes must not be negative and upload-part-bytes must be 0 or at least 5 MiB")
	}
	if c.DataTeamBytes < 0 || c.DataFileBytes < 0 || c.DataTeamFiles < 0 {
		return errors.New("data-team-quota-bytes, data-max-file-bytes and data-team-max-files must not be negative")
	}
	if c.BuildMaxSourceBytes < 0 || c.BuildMaxSourceEntries < 0 || c.MaxUploadBytes < 0 {
		return errors.New("build-max-source-bytes, build-max-source-entries and max-upload-bytes must not be negative")
	}
	if c.SecretsKMSURI != "" && c.SecretsKeyFile != "" {
		return errors.New("give --secrets-kms-uri or --secrets-key-file, not both")
	}
	switch c.SandboxUnenforcedLimits {
	case "", "warn", "refuse":
	default:
		return fmt.Errorf("--sandbox-unenforced-limits must be warn or refuse, not %q", c.SandboxUnenforcedLimits)
	}
	switch c.SandboxProvider {
	case "", "process", "container", "kubernetes":
	default:
		return fmt.Errorf("sandbox provider must be process, container or kubernetes, not %q", c.SandboxProvider)
	}
	for _, sel := range []string{c.KubeNodeSelector, c.KubeGPUNodeSelector} {
		if _, err := NodeSelector(sel); err != nil {
			return err
		}
	}
	return nil
}

// QueueList splits Queues, adding the GPU queue of a host that has GPUs.
func (c *Config) QueueList() []string {
	out := splitList(c.Queues)
	if len(c.GPUList()) > 0 && c.GPUType != "" {
		out = append(out, names.GPUQueue(c.GPUType))
	}
	return out
}

// GPUList splits GPUs.
func (c *Config) GPUList() []string { return splitList(c.GPUs) }

// NodeSelector parses a comma-separated list of key=value node labels (a --kube-*-node-selector).
func NodeSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("node selector %q: want key=value pairs, comma-separated", s)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envBool(key string) bool {
	v, _ := strconv.ParseBool(os.Getenv(key))
	return v
}

func envFloat(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(key), 64); err == nil {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}
