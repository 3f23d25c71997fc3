// Package harbor reads benchmark tasks in Harbor's task-directory format (the format of
// Terminal-Bench 2 and later, which HUD, verifiers, Inspect and SkyRL import) and says what
// Proctor makes of each: the environment build of its environment/ folder, the task (prompt,
// limits, network), the verifier (tests/) and the oracle (solution/).
//
// It fails closed: every field of task.toml is either honoured or named in the task's
// refusals, and a task with refusals is not imported. README's "Running Harbor tasks" holds the
// mapping, field by field.
package harbor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Config is task.toml: schema_version "1.x" with a [task] package section (Harbor 0.22+), or
// the older `version = "1.0"` form of Terminal-Bench 2 with author, difficulty, category and
// tags under [metadata]. Both read into this one shape.
type Config struct {
	SchemaVersion string         `toml:"schema_version"`
	Version       string         `toml:"version"` // the older name of schema_version
	Task          *PackageInfo   `toml:"task"`
	Metadata      map[string]any `toml:"metadata"`
	Verifier      Verifier       `toml:"verifier"`
	Agent         Agent          `toml:"agent"`
	Environment   Environment    `toml:"environment"`
	Solution      Solution       `toml:"solution"`
	Source        string         `toml:"source"`
	Artifacts     []any          `toml:"artifacts"`
	Steps         []any          `toml:"steps"`
}

// PackageInfo is [task]: the task's registry name (org/name) and what describes it.
type PackageInfo struct {
	Name        string   `toml:"name"`
	Version     string   `toml:"version"`
	Description string   `toml:"description"`
	Keywords    []string `toml:"keywords"`
	Authors     []Author `toml:"authors"`
}

// Author is one of [task].authors.
type Author struct {
	Name  string `toml:"name" json:"name"`
	Email string `toml:"email" json:"email,omitempty"`
}

// Verifier is [verifier]: how tests/test.sh runs.
type Verifier struct {
	TimeoutSec      *float64          `toml:"timeout_sec"`
	Env             map[string]string `toml:"env"`
	User            any               `toml:"user"`
	NetworkMode     string            `toml:"network_mode"`
	AllowedHosts    []string          `toml:"allowed_hosts"`
	EnvironmentMode string            `toml:"environment_mode"`
}

// Agent is [agent]: the agent's time and user.
type Agent struct {
	TimeoutSec   *float64 `toml:"timeout_sec"`
	User         any      `toml:"user"`
	NetworkMode  string   `toml:"network_mode"`
	AllowedHosts []string `toml:"allowed_hosts"`
}

// Solution is [solution]: the environment solution/solve.sh runs with.
type Solution struct {
	Env map[string]string `toml:"env"`
}

// Environment is [environment]: the task's container.
type Environment struct {
	BuildTimeoutSec *float64          `toml:"build_timeout_sec"`
	DockerImage     string            `toml:"docker_image"`
	CPUs            *float64          `toml:"cpus"`
	MemoryMB        *int              `toml:"memory_mb"`
	StorageMB       *int              `toml:"storage_mb"`
	Memory          string            `toml:"memory"`  // deprecated: "2G"
	Storage         string            `toml:"storage"` // deprecated: "10G"
	GPUs            *int              `toml:"gpus"`
	GPUTypes        []string          `toml:"gpu_types"`
	AllowInternet   *bool             `toml:"allow_internet"`
	NetworkMode     string            `toml:"network_mode"`
	AllowedHosts    []string          `toml:"allowed_hosts"`
	Env             map[string]string `toml:"env"`
	Healthcheck     *Healthcheck      `toml:"healthcheck"`
	MCPServers      []any             `toml:"mcp_servers"`
	SkillsDir       string            `toml:"skills_dir"`
}

// Healthcheck is [environment.healthcheck]: Docker's HEALTHCHECK, run after the sandbox starts
// and before the agent does.
type Healthcheck struct {
	Command          string   `toml:"command" json:"command" jsonschema:"the shell command; exit 0 is healthy"`
	IntervalSec      *float64 `toml:"interval_sec" json:"interval_sec,omitempty" jsonschema:"seconds between checks after the start period (default 5)"`
	TimeoutSec       *float64 `toml:"timeout_sec" json:"timeout_sec,omitempty" jsonschema:"seconds one check may run (default 30)"`
	StartPeriodSec   *float64 `toml:"start_period_sec" json:"start_period_sec,omitempty" jsonschema:"seconds after the start during which failures do not count (default 0)"`
	StartIntervalSec *float64 `toml:"start_interval_sec" json:"start_interval_sec,omitempty" jsonschema:"seconds between checks in the start period (default 5)"`
	Retries          *int     `toml:"retries" json:"retries,omitempty" jsonschema:"consecutive failures after the start period that make it unhealthy (default 3)"`
}

// Worst is the longest a healthcheck can take before it says unhealthy, in seconds: the start
// period, then retries checks each at most its timeout and an interval apart.
func (h *Healthcheck) Worst() float64 {
	or := func(v *float64, d float64) float64 {
		if v != nil && *v > 0 { // 0 is the default, as in Docker
			return *v
		}
		return d
	}
	retries := 3
	if h.Retries != nil {
		retries = *h.Retries
	}
	return or(h.StartPeriodSec, 0) + or(h.TimeoutSec, 30) + float64(retries)*(or(h.IntervalSec, 5)+or(h.TimeoutSec, 30))
}

// Network modes of [environment].network_mode.
const (
	NetworkPublic    = "public"
	NetworkNone      = "no-network"
	NetworkAllowlist = "allowlist"
)

// Defaults Harbor gives fields a task leaves out.
const (
	DefaultVerifierTimeoutSec = 600
	DefaultAgentTimeoutSec    = 600 // Harbor leaves it to the agent; Proctor needs a bound
	DefaultMemoryMB           = 2048
	DefaultCPUs               = 1
)

// MaxBuildTimeoutSec is the longest build a task may declare: the Build workflow's own bound.
const MaxBuildTimeoutSec = 30 * 60

// MaxHiddenBytes bounds a task's tests/ and solution/ together: they travel with the task
// (base64 in its arguments and validation) and are written into the sandbox when needed.
const MaxHiddenBytes = 4 << 20

// File is a file of a task's tests/ or solution/ folder: its path relative to that folder
// (slash-separated), its bytes and its mode bits.
type File struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
	Mode    uint32 `json:"mode,omitempty"`
}

// Task is one task directory, read.
type Task struct {
	// Dir is where it was read from; Name is its name: [task].name, else the folder's name.
	Dir, Name string
	Config    Config
	// Instruction is instruction.md, the agent's prompt.
	Instruction string
	// EnvironmentDir is the environment/ folder, built by its Dockerfile; ContextHash is the
	// hash of its content (paths, modes, bytes), which tasks that share a build share.
	EnvironmentDir, ContextHash string
	// Tests and Solution are the files of tests/ and solution/.
	Tests, Solution []File
	// Refusals are what this task asks that Proctor does not do; a task with any is not
	// imported. Notes are what an import says of an accepted task (a default it filled in, a
	// field honoured in a way worth knowing).
	Refusals, Notes []string
}

// Options are what an import accepts beyond the default.
type Options struct {
	// AllowUnenforced names declared limits accepted although no provider enforces them
	// ("storage_mb"); without it such a task is refused.
	AllowUnenforced []string
}

// IsTaskDir says whether dir looks like a Harbor task: it holds task.toml.
func IsTaskDir(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "task.toml"))
	return err == nil && fi.Mode().IsRegular()
}

// FindTasks lists the task directories under root: root itself when it is one, else its
// subdirectories that are (a dataset), sorted.
func FindTasks(root string) ([]string, error) {
	if IsTaskDir(root) {
		return []string{root}, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if p := filepath.Join(root, e.Name()); e.IsDir() && IsTaskDir(p) {
			dirs = append(dirs, p)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s: no task.toml in it or in any folder directly under it: not a Harbor task or dataset", root)
	}
	return dirs, nil
}

// Read reads the task in dir and checks it. An error is returned only when dir cannot be read as
// a task at all (no task.toml, TOML that does not parse); what Proctor does not support is in
// the task's Refusals.
func Read(dir string, opts Options) (*Task, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "task.toml"))
	if err != nil {
		return nil, err
	}
	t := &Task{Dir: dir, Name: filepath.Base(dir)}
	md, err := toml.Decode(string(raw), &t.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "task.toml"), err)
	}
	for _, k := range md.Undecoded() {
		// Keys under [metadata] are kept, not checked; those of tables refused whole
		// (steps, artifacts, MCP servers) are not refused once more.
		if len(k) > 1 && (k[0] == "metadata" || k[0] == "steps" || k[0] == "artifacts") ||
			len(k) > 2 && k[0] == "environment" && k[1] == "mcp_servers" {
			continue
		}
		t.refuse("%s: not a field Proctor knows (a newer Harbor schema?)", k.String())
	}
	if p := t.Config.Task; p != nil && p.Name != "" {
		t.Name = p.Name
	}
	t.check(opts)
	t.readFiles(dir)
	return t, nil
}

func (t *Task) refuse(format string, args ...any) {
	t.Refusals = append(t.Refusals, fmt.Sprintf(format, args...))
}

func (t *Task) note(format string, args ...any) {
	t.Notes = append(t.Notes, fmt.Sprintf(format, args...))
}

// check refuses what task.toml asks that Proctor does not honour.
func (t *Task) check(opts Options) {
	c := &t.Config
	switch v := cmp(c.SchemaVersion, c.Version); {
	case v == "":
	case !strings.HasPrefix(v, "1."):
		t.refuse("schema_version %q: Proctor reads Harbor task schema 1.x", v)
	}
	if len(c.Artifacts) > 0 {
		t.refuse("[[artifacts]]: collecting files after the run is not supported yet")
	}
	if len(c.Steps) > 0 {
		t.refuse("[[steps]]: multi-step tasks are not supported yet")
	}
	for _, u := range []struct {
		field string
		v     any
	}{{"agent.user", c.Agent.User}, {"verifier.user", c.Verifier.User}} {
		if _, ok := userName(u.v); !ok {
			t.refuse("%s = %v: a user name or a uid", u.field, u.v)
		}
	}
	if c.Agent.NetworkMode != "" || len(c.Agent.AllowedHosts) > 0 || c.Verifier.NetworkMode != "" || len(c.Verifier.AllowedHosts) > 0 {
		t.refuse("agent/verifier network_mode: a network policy per phase is not supported (the sandbox keeps [environment]'s for the whole attempt)")
	}
	if m := c.Verifier.EnvironmentMode; m != "" && m != "shared" {
		t.refuse("verifier.environment_mode %q: a verifier in an environment of its own is not supported yet", m)
	}
	for k, v := range c.Verifier.Env {
		if strings.Contains(v, "${") {
			t.refuse("verifier.env.%s: values taken from the host (${...}) are not supported yet", k)
		}
	}
	for k, v := range c.Solution.Env {
		if strings.Contains(v, "${") {
			t.refuse("solution.env.%s: values taken from the host (${...}) are not supported yet", k)
		}
	}
	for _, d := range []struct {
		name string
		v    *float64
	}{{"verifier.timeout_sec", c.Verifier.TimeoutSec}, {"agent.timeout_sec", c.Agent.TimeoutSec}, {"environment.build_timeout_sec", c.Environment.BuildTimeoutSec}, {"environment.cpus", c.Environment.CPUs}} {
		if d.v != nil && (math.IsNaN(*d.v) || *d.v <= 0 || *d.v > 7*24*3600) {
			t.refuse("%s = %v: a positive number of at most a week", d.name, *d.v)
		}
	}
	e := &c.Environment
	if e.BuildTimeoutSec != nil && *e.BuildTimeoutSec > MaxBuildTimeoutSec {
		t.refuse("environment.build_timeout_sec = %v: Proctor's builds are bounded at %d s", *e.BuildTimeoutSec, MaxBuildTimeoutSec)
	}
	if e.DockerImage != "" {
		t.note("environment.docker_image %s: built from environment/Dockerfile instead (no registry pull)", e.DockerImage)
	}
	if e.Memory != "" {
		if mb, err := parseSize(e.Memory); err != nil {
			t.refuse("environment.memory %q: %v", e.Memory, err)
		} else if e.MemoryMB == nil {
			e.MemoryMB = &mb
		}
	}
	if e.Storage != "" {
		if mb, err := parseSize(e.Storage); err != nil {
			t.refuse("environment.storage %q: %v", e.Storage, err)
		} else if e.StorageMB == nil {
			e.StorageMB = &mb
		}
	}
	if e.MemoryMB != nil && (*e.MemoryMB < 16 || *e.MemoryMB > 4<<20) {
		t.refuse("environment.memory_mb = %d: between 16 and 4194304", *e.MemoryMB)
	}
	if e.StorageMB != nil {
		if slices.Contains(opts.AllowUnenforced, "storage_mb") {
			t.note("environment.storage_mb = %d: accepted unenforced (no provider bounds disk yet)", *e.StorageMB)
		} else {
			t.refuse("environment.storage_mb = %d: no provider bounds a sandbox's disk yet (accept it unenforced with --allow-unenforced storage_mb)", *e.StorageMB)
		}
	}
	if e.GPUs != nil && (*e.GPUs < 0 || *e.GPUs > 64) {
		t.refuse("environment.gpus = %d: between 0 and 64", *e.GPUs)
	}
	if len(e.GPUTypes) > 1 {
		t.refuse("environment.gpu_types %q: Proctor routes a task to one GPU type; name one", e.GPUTypes)
	}
	if len(e.MCPServers) > 0 {
		t.refuse("environment.mcp_servers: MCP servers of the task's own are not supported yet")
	}
	if e.SkillsDir != "" {
		t.refuse("environment.skills_dir: agent skills are not supported yet")
	}
	for k, v := range e.Env {
		if !envName.MatchString(k) {
			t.refuse("environment.env.%s: not a variable name", k)
		} else if _, err := ExpandEnv(v, func(string) (string, bool) { return "", true }); err != nil {
			t.refuse("environment.env.%s: %v", k, err)
		}
	}
	if h := e.Healthcheck; h != nil {
		if strings.TrimSpace(h.Command) == "" {
			t.refuse("environment.healthcheck.command: missing")
		}
		for name, v := range map[string]*float64{"interval_sec": h.IntervalSec, "timeout_sec": h.TimeoutSec, "start_period_sec": h.StartPeriodSec, "start_interval_sec": h.StartIntervalSec} {
			if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 3600) {
				t.refuse("environment.healthcheck.%s = %v: between 0 and 3600", name, *v)
			}
		}
		if h.Retries != nil && (*h.Retries < 1 || *h.Retries > 100) {
			t.refuse("environment.healthcheck.retries = %d: between 1 and 100", *h.Retries)
		}
	}
	if _, err := t.Network(); err != nil {
		t.refuse("%v", err)
	}
}

// envName is what a variable may be called.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envRef is a ${NAME} or ${NAME:-default} in a value of [environment].env.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// ExpandEnv is value with each ${NAME} replaced by lookup(NAME), or by its default in
// ${NAME:-default} when lookup has none (or an empty one). A reference without a value or a
// default is an error naming it; a "$" that starts no reference is kept as it is, but "${" must
// start one.
func ExpandEnv(value string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(value, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		if v, ok := lookup(m[1]); ok && (v != "" || m[2] == "") {
			return v
		}
		if m[2] != "" {
			return m[3]
		}
		missing = append(missing, m[1])
		return ""
	})
	if strings.Contains(envRef.ReplaceAllString(value, ""), "${") {
		return "", fmt.Errorf("%q: a reference is ${NAME} or ${NAME:-default}", value)
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s not set", strings.Join(missing, ", "))
	}
	return out, nil
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseSize reads Harbor's deprecated sizes ("2G", "512M", "1024K") in MiB.
func parseSize(s string) (int, error) {
	s = strings.ToUpper(strings.TrimSpace(s))
	if s == "" {
		return 0, errors.New("empty")
	}
	mult := map[byte]float64{'G': 1024, 'M': 1, 'K': 1.0 / 1024}[s[len(s)-1]]
	if mult == 0 {
		return 0, errors.New(`a size like "2G" or "512M"`)
	}
	f, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil || f <= 0 {
		return 0, errors.New(`a size like "2G" or "512M"`)
	}
	return int(f * mult), nil
}

// userName is a task's user field ([agent].user, [verifier].user) as a name or a uid, "" for
// none; ok false for a value that is neither.
func userName(v any) (string, bool) {
	switch u := v.(type) {
	case nil:
		return "", true
	case string:
		return u, u != "" && !strings.ContainsAny(u, ":\n\x00")
	case int64:
		return strconv.FormatInt(u, 10), u >= 0 && u < 1<<32-1
	}
	return "", false
}

// Network is the task's network policy: public, no-network, or allowlist with its hosts (Harbor's
// resolution: network_mode when set, else allow_internet, else public; allowed_hosts alone means
// allowlist).
func (t *Task) Network() (mode string, err error) {
	e := t.Config.Environment
	mode = e.NetworkMode
	switch {
	case mode == "" && len(e.AllowedHosts) > 0:
		mode = NetworkAllowlist
	case mode == "" && e.AllowInternet != nil && !*e.AllowInternet:
		mode = NetworkNone
	case mode == "":
		mode = NetworkPublic
	}
	switch mode {
	case NetworkPublic, NetworkNone:
		if len(e.AllowedHosts) > 0 {
			return "", fmt.Errorf("environment.allowed_hosts: only with network_mode = %q", NetworkAllowlist)
		}
	case NetworkAllowlist:
		if len(e.AllowedHosts) == 0 {
			return "", errors.New("environment.network_mode allowlist: name its allowed_hosts")
		}
		for _, h := range e.AllowedHosts {
			if strings.ContainsAny(h, ":/") || strings.TrimSpace(h) == "" {
				return "", fmt.Errorf("environment.allowed_hosts %q: a host name or IPv4 address, not a URL, CIDR, port or path", h)
			}
		}
	default:
		return "", fmt.Errorf("environment.network_mode %q: one of public, no-network, allowlist", mode)
	}
	return mode, nil
}

// AgentTimeoutSec is the agent's time: [agent].timeout_sec, else DefaultAgentTimeoutSec.
func (t *Task) AgentTimeoutSec() float64 {
	if v := t.Config.Agent.TimeoutSec; v != nil {
		return *v
	}
	return DefaultAgentTimeoutSec
}

// VerifierTimeoutSec is the verifier's time: [verifier].timeout_sec, else Harbor's 600.
func (t *Task) VerifierTimeoutSec() float64 {
	if v := t.Config.Verifier.TimeoutSec; v != nil {
		return *v
	}
	return DefaultVerifierTimeoutSec
}

// readFiles reads instruction.md, tests/ and solution/, hashes environment/, and refuses what is
// missing or too large.
func (t *Task) readFiles(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "instruction.md"))
	switch {
	case err != nil:
		t.refuse("instruction.md: %v", pathError(err))
	case strings.TrimSpace(string(b)) == "":
		t.refuse("instruction.md is empty")
	default:
		t.Instruction = string(b)
	}
	t.EnvironmentDir = filepath.Join(dir, "environment")
	switch fi, err := os.Stat(filepath.Join(t.EnvironmentDir, "Dockerfile")); {
	case err == nil && fi.Mode().IsRegular():
		if t.ContextHash, err = HashTree(t.EnvironmentDir); err != nil {
			t.refuse("environment/: %v", err)
		}
	case exists(filepath.Join(t.EnvironmentDir, "docker-compose.yaml")) || exists(filepath.Join(t.EnvironmentDir, "docker-compose.yml")):
		t.refuse("environment/docker-compose.yaml: tasks of several containers are not supported yet")
	default:
		t.refuse("environment/Dockerfile: missing (a prebuilt docker_image alone is not pulled: no registry pull yet)")
	}
	if t.Tests, err = readTree(filepath.Join(dir, "tests")); err != nil {
		t.refuse("tests/: %v", err)
	} else if !slices.ContainsFunc(t.Tests, func(f File) bool { return f.Path == "test.sh" }) {
		t.refuse("tests/test.sh: missing (it is the verifier)")
	}
	if exists(filepath.Join(dir, "solution")) {
		if t.Solution, err = readTree(filepath.Join(dir, "solution")); err != nil {
			t.refuse("solution/: %v", err)
		} else if !slices.ContainsFunc(t.Solution, func(f File) bool { return f.Path == "solve.sh" }) {
			t.refuse("solution/ has no solve.sh")
		}
	} else {
		t.note("no solution/: the oracle has nothing to run and certification will fail it")
	}
	total := 0
	for _, f := range slices.Concat(t.Tests, t.Solution) {
		total += len(f.Content)
	}
	if total > MaxHiddenBytes {
		t.refuse("tests/ and solution/ hold %d bytes: at most %d (they travel with the task)", total, MaxHiddenBytes)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// readTree reads the regular files under dir (no links, no devices), sorted by path.
func readTree(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return pathError(err)
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s: not a regular file (links and devices are not carried)", filepath.ToSlash(rel))
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return pathError(err)
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Content: b, Mode: uint32(fi.Mode().Perm())})
		return nil
	})
	return files, err
}

// HashTree hashes the folder dir as a build context: every entry's slash path, type, mode bits
// and content (a link's target), in path order. Two folders with the same hash build the same
// image.
func HashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return pathError(err)
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00%o\x00", path.Clean(filepath.ToSlash(rel)), fi.Mode().Type(), fi.Mode().Perm())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%d\x00", fi.Size())
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		case d.IsDir():
		default:
			return fmt.Errorf("%s: not a file, folder or link", filepath.ToSlash(rel))
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
