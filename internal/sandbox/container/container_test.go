package container_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	"github.com/proctorhq/proctor/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// images makes one image per root file system, named by its digest.

func newProvider(t *testing.T, host string, max int, opts ...func(*container.Options)) *container.Provider {
	t.Helper()
	o := container.Options{Host: host, Root: t.TempDir(), Owner: "test-" + t.Name(), MaxSandboxes: max, StopGrace: time.Second}
	for _, f := range opts {
		f(&o)
	}
	p, err := container.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestContainerProviderSuite runs the provider suite against a real engine (podman's Docker
// Engine API service): the same behaviour as the process provider.
func TestContainerProviderSuite(t *testing.T) {
	host := testenv.ContainerEngine(t)
	var im sandboxtest.Images
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T, max int) sandbox.Provider { return newProvider(t, host, max) },
		Spec: func(t *testing.T, root string, argv ...string) sandbox.Spec {
			return sandbox.Spec{Command: argv, Image: im.Of(t, root)}
		},
	})
}

// engineClient talks to the test engine directly, to see what the provider left there.
func engineClient(t *testing.T, host string) *client.Client {
	t.Helper()
	c, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ownedBy(t *testing.T, c *client.Client, owner string) []string {
	t.Helper()
	res, err := c.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", container.LabelOwner+"="+owner)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestLimitsAndLabelsReachTheEngine(t *testing.T) {
	host := testenv.ContainerEngine(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := newProvider(t, host, 2, func(o *container.Options) { o.GPUs, o.GPUType = []string{"0", "1"}, "h100" })
	defer p.Close(context.Background())
	sb, err := p.Start(t.Context(), sandbox.Spec{ID: "limits", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root),
		Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 96, GPU: sandbox.GPURequest{Count: 1, Type: "h100"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	c := engineClient(t, host)
	ids := ownedBy(t, c, "test-"+t.Name())
	if len(ids) != 1 {
		t.Fatalf("containers with the owner label: %v, want one", ids)
	}
	got, err := c.ContainerInspect(t.Context(), ids[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := got.Container.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 96<<20 || string(hc.NetworkMode) != "none" || !hc.ReadonlyRootfs {
		t.Errorf("host config: cpus %d, memory %d, network %q, read-only root %v; want 5e8, 96 MiB, none, true",
			hc.NanoCPUs, hc.Memory, hc.NetworkMode, hc.ReadonlyRootfs)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != sandbox.DefaultMaxProcesses {
		t.Errorf("host config: pids limit %v, want %d", hc.PidsLimit, sandbox.DefaultMaxProcesses)
	}
	if strings.Join(sb.Devices(), ",") != "0" {
		t.Errorf("devices %v, want GPU 0", sb.Devices())
	}
	if p.FreeGPUs() != 1 {
		t.Errorf("FreeGPUs() = %d while one is in use", p.FreeGPUs())
	}
	if got.Container.Config.Labels[container.LabelSandbox] != "limits" {
		t.Errorf("labels %v", got.Container.Config.Labels)
	}
	if err := sb.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ids := ownedBy(t, c, "test-"+t.Name()); len(ids) != 0 {
		t.Errorf("containers left after Stop: %v", ids)
	}
	if p.FreeGPUs() != 2 {
		t.Errorf("FreeGPUs() = %d after Stop", p.FreeGPUs())
	}
}

// A worker that dies leaves its containers running; the next provider of the same owner removes
// them, and their work dirs, when it starts.
func TestANewProviderRemovesWhatACrashedOneLeft(t *testing.T) {
	host := testenv.ContainerEngine(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	dir := t.TempDir()
	opts := func(o *container.Options) { o.Root, o.Owner = dir, "crashed-worker" }
	crashed := newProvider(t, host, 4, opts)
	for _, id := range []string{"a", "b"} {
		if _, err := crashed.Start(t.Context(), sandbox.Spec{ID: id, Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)}); err != nil {
			t.Fatal(err)
		}
	}
	// A bystander of another owner on the same engine is left alone.
	other := newProvider(t, host, 1)
	defer other.Close(context.Background())
	keep, err := other.Start(t.Context(), sandbox.Spec{ID: "keep", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "owner-crashed-worker")); len(entries) != 2 {
		t.Fatalf("the crashed worker's work dirs: %d, want 2", len(entries))
	}
	c := engineClient(t, host)
	if ids := ownedBy(t, c, "crashed-worker"); len(ids) != 2 {
		t.Fatalf("the crashed worker's containers: %v", ids)
	}
	// No Close: the provider is abandoned as a killed worker's would be.
	restarted := newProvider(t, host, 4, opts)
	defer restarted.Close(context.Background())
	if ids := ownedBy(t, c, "crashed-worker"); len(ids) != 0 {
		t.Errorf("containers left after the restart: %v", ids)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "owner-crashed-worker")); len(entries) != 0 {
		t.Errorf("work dirs left after the restart: %d", len(entries))
	}
	if keep.Err() != nil {
		t.Errorf("another owner's sandbox was stopped: %v", keep.Err())
	}
}

func TestAnImageThatCannotLoadFailsClearly(t *testing.T) {
	host := testenv.ContainerEngine(t)
	p := newProvider(t, host, 1)
	defer p.Close(context.Background())
	_, err := p.Start(t.Context(), sandbox.Spec{ID: "bad", Command: []string{"/bin/true"}, Image: &sandbox.Image{
		Ref: "proctor.local/broken:1", Load: func(_ context.Context, w io.Writer) error {
			_, err := io.WriteString(w, "not a tarball")
			return err
		}}})
	if err == nil || !strings.Contains(err.Error(), "proctor.local/broken:1") {
		t.Errorf("Start of an image that does not load: %v, want an error naming it", err)
	}
	if p.Running() != 0 {
		t.Errorf("Running() = %d", p.Running())
	}
}

// BenchmarkContainerMCPReady: the todo environment in a container of the test engine (its image
// loaded once), from Start to an initialized MCP session.
func BenchmarkContainerMCPReady(b *testing.B) {
	host := testenv.ContainerEngine(b)
	var im sandboxtest.Images
	p, err := container.New(b.Context(), container.Options{Host: host, Root: b.TempDir(), Owner: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	sandboxtest.BenchmarkMCPReady(b, p, sandbox.Spec{Command: sandboxtest.TodoCommand, Image: im.Of(b, sandboxtest.Root(b))})
}
