// Package sandbox runs an environment's MCP server in an isolated sandbox and
// tears it down again. Providers (the `process` provider here, the
// `container` provider in package container, the `kubernetes` provider in package kube) sit
// behind one Provider interface, so the rollout
// activities provision, talk to and release a sandbox without knowing where it
// runs.
//
// The process provider starts the environment's entrypoint as a child of the
// worker in a private work directory, isolated with bubblewrap when the host
// has it (own pid, ipc, uts, mount and, unless asked otherwise, network
// namespaces; a read-only view of the host), limited with cgroup v2 or, where
// cgroups cannot be used, with rlimits, and killed together with every process
// it started when it is stopped or when the worker dies. GPU hosts hand out
// whole devices from a fixed list.
//
// The package may import the standard library only (its tests also use the
// MCP SDK, to talk to a real environment); it must not import other proctor
// packages, so that workers, tests and tools can all depend on it.
package sandbox

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors callers branch on. Start wraps them with the sandbox id.
var (
	// ErrCapacity means the provider already runs as many sandboxes as it may;
	// the caller retries later or elsewhere. Start returns it at once.
	ErrCapacity = errors.New("sandbox: host at capacity")
	// ErrNoGPU means the GPUs asked for (count and type) cannot be had here now:
	// the host has none of that type, too few, or too few free.
	ErrNoGPU = errors.New("sandbox: GPUs not available")
	// ErrClosed means the provider was closed and starts nothing more.
	ErrClosed = errors.New("sandbox: provider closed")
	// ErrInvalidSpec means the Spec cannot be run as given (no id or command,
	// a command that does not exist, a negative resource). Retrying will not help.
	ErrInvalidSpec = errors.New("sandbox: invalid spec")
	// ErrExited is wrapped by every error Sandbox.Err returns: the environment
	// process has exited, for whatever reason.
	ErrExited = errors.New("sandbox: environment exited")
	// ErrStopped is wrapped by Sandbox.Err when the exit was caused by Stop.
	ErrStopped = errors.New("sandbox: stopped")
	// ErrNoListen means Spec.Listen cannot be had here: the provider runs the sandbox in no
	// network namespace of its own that this process may enter (no bubblewrap, not enough
	// privilege, or a provider that runs images elsewhere). Start makes no sandbox.
	ErrNoListen = errors.New("sandbox: cannot listen inside the sandbox")
	// ErrLost is wrapped by Sandbox.Err when the sandbox ended for a reason of the host's, not its
	// command's, and no exit status of the command is known: its pod was deleted by someone
	// else, or the worker's hold on it broke. A caller retries the work elsewhere.
	ErrLost = errors.New("sandbox: lost")
)

// Resources a sandbox is given (from the task's runtime_config.resources).
type Resources struct {
	// CPU is the number of cores the sandbox may use; 0 means no limit.
	CPU float64
	// MemoryMB is the memory the sandbox may use in MiB; 0 means no limit.
	MemoryMB int
	// GPU asks for whole GPU devices.
	GPU GPURequest
}

// LimitGaps is a provider that may not enforce every limit a sandbox declares, on this host:
// Unenforced lists those of res it would not, each as "what: why" (none when all hold). A
// provider without it enforces what it is given (its engine or cluster does).
type LimitGaps interface {
	Unenforced(res Resources) []string
}

// GPURequest asks for Count whole devices of Type ("" for any type).
type GPURequest struct {
	Count int
	Type  string
}

// Spec is what to run.
type Spec struct {
	// ID is unique per sandbox, e.g. "<trace id>-<try>"; it names the work dir
	// and appears in logs. It must not contain a slash.
	ID string
	// Command is the argv of the environment's MCP server, e.g.
	// ["/abs/path/todo", "--transport", "stdio"]; it speaks MCP over
	// stdin/stdout. A bare name is looked up in the sandbox's PATH.
	Command []string
	// Env holds extra environment variables. The host environment is not
	// inherited except PATH and LANG; HOME is the work dir. Env may override
	// all three; the GPU variables cannot be overridden.
	Env map[string]string
	// Resources are the limits and devices the sandbox gets.
	Resources Resources
	// Network says the sandbox may reach the internet. It never shares the worker's network:
	// under bubblewrap and in a container its network namespace has only its loopback either
	// way, and its way out is the egress proxy (internal/egress) its caller serves on Listen;
	// a pod is let out to public addresses only, by the namespace's network policy. (A process
	// provider without isolation shares the host's network whatever it says.)
	Network bool
	// Companion marks a sandbox that runs beside one that holds a slot already, for the same
	// work (a brought agent beside its environment): it takes no slot of its own, so that it
	// never waits for one its partner keeps from it, and counts in no capacity.
	Companion bool
	// WorkDir, when set, is an existing directory (another sandbox's work dir, say) that this
	// sandbox works in instead of a fresh one of its own: HOME and the working directory, where
	// a sandbox's work dir appears (WorkDirInImage with RootFS). Stop leaves it in place.
	WorkDir string
	// Within, when set, is a running sandbox of the same provider that this one runs inside, as
	// far as the provider can: a process or container sandbox works in its work dir (WorkDir,
	// which the caller sets to Within's), and the kubernetes provider runs this one as an
	// ephemeral container of Within's pod (its work dir, /tmp and network namespace shared).
	// Within a sandbox with a writable root (HasWritableRoot), this one runs in that very root
	// (what either changes, the other sees), root there as Within's processes are: the process
	// provider binds the same overlay as its root; the container provider runs it as a process
	// of Within's container (the engine's exec: its mounts copied in, its listener needed);
	// the kubernetes provider, whose ephemeral containers have roots of their own, refuses
	// such a sandbox (ErrInvalidSpec).
	Within Sandbox
	// User, when set, is who the command runs as: a user of the image (a name or a uid; a
	// Harbor task's [agent].user, for the agent inside it). The container provider honours it in
	// a sandbox within a container; the process provider runs its sandboxes as their sandbox
	// user (root inside a writable root) and refuses any other, as the kubernetes provider does.
	User string
	// Dir, when set, is the working directory of the sandbox's command: an absolute path in its
	// root (a Harbor task's WORKDIR, where its tools work), instead of where the work dir
	// appears. HOME stays the work dir.
	Dir string
	// Listen, when set, asks for a listener inside the sandbox's own network namespace, there
	// before Command starts: what the sandbox's processes reach at 127.0.0.1:Listen.Port is
	// served by whoever holds the listener, outside the sandbox. The process provider needs
	// Network false (then nothing else is reachable); the container provider relays the port
	// to a unix socket (see container.Options.Relay). A provider that cannot returns an error
	// wrapping ErrNoListen.
	Listen *Listen
	// ReadOnlyBinds are extra host paths made visible read-only inside the
	// sandbox. The directory of Command[0] is added automatically.
	ReadOnlyBinds []string
	// Mounts are directories (or images' files) shown at other paths in the sandbox (a brought
	// agent's unpacked image at AgentRootInside, inside its environment's sandbox), by a provider
	// that is a Mounter; others refuse them (ErrInvalidSpec). Command[0] may lie in one. A Target
	// under /tmp needs no mount point in a read-only root.
	Mounts []Mount
	// RootFS, when set, is an image's unpacked root file system (an absolute
	// host path, left unchanged): under bubblewrap it is the sandbox's
	// read-only root instead of the host's, Command[0] is an absolute path
	// within it, and the work dir appears at WorkDirInImage (HOME and the
	// working directory). It must hold /dev, /proc and /tmp. Without
	// bubblewrap the entrypoint runs from RootFS on the host file system.
	RootFS string
	// WritableRoot asks for a root file system the sandbox may change anywhere, as a machine of
	// its own (a Harbor task's image, which its tasks and solutions change everywhere): its
	// changes are its own, gone with it, and the image stays as it was. The container and
	// kubernetes providers honour it with the engine's copy-on-write layer (root inside as the
	// image says); the process provider with an overlay of its own over the image's root, root
	// inside and the sandbox user outside (see writableroot.go), where it runs as root with
	// bubblewrap and a sandbox user, and refuses it elsewhere (ErrInvalidSpec).
	WritableRoot bool
	// Image is what a container provider runs (Command is its entrypoint and
	// argv); the process provider runs RootFS instead and ignores it.
	Image *Image
	// OnLog, when set, is called for each line the environment writes to
	// stderr, as it comes, from one goroutine per sandbox. It must not block
	// for long: the environment blocks once the stderr pipe is full.
	OnLog func(LogLine)
}

// HasWritableRoot says whether sb was started with a root file system of its own that it may
// change (Spec.WritableRoot).
func HasWritableRoot(sb Sandbox) bool {
	w, ok := sb.(interface{ HasWritableRoot() bool })
	return ok && w.HasWritableRoot()
}

// WithinWritableRoot refuses, for a provider that cannot share one, a sandbox within another
// that has a writable root.
func WithinWritableRoot(spec Spec, provider string) error {
	if spec.Within != nil && HasWritableRoot(spec.Within) {
		return Invalid("sandbox %s: the %s provider cannot run a sandbox inside %s, whose root is writable (a Harbor task's): "+
			"it would not see that root's changes; the process provider can", spec.ID, provider, spec.Within.ID())
	}
	return nil
}

// Image names an image for a provider that runs images in a container engine,
// and says how to get it there.
type Image struct {
	// Ref is the name the image is known by once loaded, e.g.
	// "proctor.local/env:<digest>"; the same Ref must always mean the same
	// content, since an engine that has Ref is not asked to load it again.
	Ref string
	// Load writes the image to w as a `docker save` tarball whose manifest
	// tags it Ref. It is called when the engine does not have Ref yet.
	Load func(ctx context.Context, w io.Writer) error
}

// ImageRunner is implemented by providers that run Spec.Image rather than
// Spec.RootFS.
type ImageRunner interface {
	Provider
	// RunsImages is a marker: such a provider needs Spec.Image.
	RunsImages()
}

// WorkDirInImage is where a RootFS sandbox sees its work dir (on the /tmp tmpfs,
// so that a read-only root needs no mount point for it).
const WorkDirInImage = "/tmp/work"

// LogLine is one line of the environment's stderr (its stdout is the MCP stream).
type LogLine struct {
	Stream string // "stderr"
	Line   string // without the trailing newline
	Time   time.Time
}

// Sandbox is a running environment.
type Sandbox interface {
	// ID is Spec.ID.
	ID() string
	// Stdin is the server's stdin (MCP stdio transport).
	Stdin() io.WriteCloser
	// Stdout is the server's stdout.
	Stdout() io.ReadCloser
	// WorkDir is the sandbox's private writable directory on the host; inside
	// the sandbox it has the same path and is HOME and the working directory.
	WorkDir() string
	// Logs returns every stderr line so far, oldest first; only the last
	// 10,000 lines are kept.
	Logs() []LogLine
	// Done is closed when the environment process has exited.
	Done() <-chan struct{}
	// Err is nil while the environment runs. Once it has exited, Err says why;
	// the error always wraps ErrExited, and also ErrStopped when Stop caused the
	// exit (an *exec.ExitError, if any, can be had with errors.As).
	Err() error
	// Devices are the GPU device ids allocated to the sandbox (e.g. ["0","1"]),
	// empty without GPUs.
	Devices() []string
	// Stop sends SIGTERM to every process of the sandbox, then SIGKILL after a
	// grace (5s by default, shorter when ctx has an earlier deadline, none once
	// ctx is done); it then releases the sandbox's GPUs and capacity slot and
	// removes its work dir. Stop is idempotent and safe to call concurrently:
	// every call waits for the one teardown and returns its result. Stop must
	// be called for every sandbox Start returned, even after it exited on its
	// own: until then it holds its slot, its GPUs and its work dir.
	Stop(ctx context.Context) error
}

// Provider starts and stops sandboxes.
type Provider interface {
	// Start starts spec. It returns an error wrapping ErrCapacity when the host
	// is full and ErrNoGPU when GPUs of that type and count cannot be had.
	Start(ctx context.Context, spec Spec) (Sandbox, error)
	// Running is how many sandboxes hold a slot (started and not yet stopped; companions hold
	// none).
	Running() int
	// Capacity is the most sandboxes the provider runs at once.
	Capacity() int
	// Close stops every sandbox the provider started and starts no more.
	Close(ctx context.Context) error
}
