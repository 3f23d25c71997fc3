package container

import (
	"reflect"
	"testing"

	"github.com/moby/moby/api/types/container"

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
	if got := p.hostConfig(sandbox.Spec{Network: true}, "/w", nil); got.NetworkMode != "none" || got.DeviceRequests != nil {
		t.Errorf("with network, no GPUs: %+v", got)
	}
}
