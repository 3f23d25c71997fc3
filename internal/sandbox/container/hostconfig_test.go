package container

import (
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/system"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Podman's Docker API accepts device requests but does not report them back, so what the
// provider asks of the engine is checked here; the rest of the host config is checked against
// the engine in TestLimitsAndLabelsReachTheEngine.
func TestHostConfigAsksForTheAllocatedGPUs(t *testing.T) {
	p := &Provider{gpuDriver: "nvidia", runtime: "runc"}
	got := p.hostConfig(sandbox.Spec{Resources: sandbox.Resources{CPU: 2, MemoryMB: 512, GPU: sandbox.GPURequest{Count: 2}}}, "/w", []string{"1", "3"})
	want := []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: []string{"1", "3"}, Capabilities: [][]string{{"gpu"}}}}
	if !reflect.DeepEqual(got.DeviceRequests, want) || got.NanoCPUs != 2e9 || got.Memory != 512<<20 || got.Runtime != "runc" {
		t.Errorf("host config = %+v", got)
	}
	if got.NetworkMode != "none" || got.Binds[0] != "/w:"+sandbox.WorkDirInImage+":rw" {
		t.Errorf("network %q, binds %q", got.NetworkMode, got.Binds)
	}
	// Allowed the network, a container still has none of the engine's: its way out is the egress
	// proxy on Spec.Listen (the engine's networks reach the host and its networks).
	if got := p.hostConfig(sandbox.Spec{Network: true}, "/w", nil); got.NetworkMode != "none" || got.DeviceRequests != nil || !got.ReadonlyRootfs {
		t.Errorf("with network, no GPUs: %+v", got)
	}
	// A writable root is the container's own layer (TestHarborTasks writes it), /tmp in it as
	// on a machine of its own (where an agent within it is copied: within.go).
	if got := p.hostConfig(sandbox.Spec{WritableRoot: true}, "/w", nil); got.ReadonlyRootfs || got.Tmpfs != nil {
		t.Errorf("a writable root: %+v", got)
	}
	if got := p.hostConfig(sandbox.Spec{}, "/w", nil); got.Tmpfs["/tmp"] == "" {
		t.Errorf("a read-only root has no /tmp tmpfs: %+v", got)
	}
}

// An engine that says it cannot limit CPU (no CFS quota) or memory on its host leaves those
// limits unenforced, and the provider says which; one that can leaves none.
func TestTheEnginesMissingLimitsAreNamed(t *testing.T) {
	res := sandbox.Resources{CPU: 2, MemoryMB: 512}
	if gaps := engineGaps(system.Info{CPUCfsQuota: true, MemoryLimit: true}, res); len(gaps) != 0 {
		t.Errorf("an engine that limits both leaves %q", gaps)
	}
	gaps := engineGaps(system.Info{MemoryLimit: true}, res)
	if len(gaps) != 1 || gaps[0] != "cpu 2: the container engine cannot limit CPU on its host (no CFS quota)" {
		t.Errorf("an engine without CFS quota leaves %q", gaps)
	}
	if gaps := engineGaps(system.Info{}, sandbox.Resources{MemoryMB: 64}); len(gaps) != 1 || gaps[0] != "memory 64 MiB: the container engine cannot limit memory on its host" {
		t.Errorf("an engine without memory limits leaves %q", gaps)
	}
	if gaps := engineGaps(system.Info{}, sandbox.Resources{}); len(gaps) != 0 {
		t.Errorf("nothing declared, yet %q", gaps)
	}
}
