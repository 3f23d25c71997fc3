package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// GPUPool hands out whole devices from a fixed list. It is the only record
// of which device is in use, so a device is never given to two sandboxes.
type GPUPool struct {
	mu    sync.Mutex
	typ   string
	ids   []string        // in configured order, so allocation is predictable
	inUse map[string]bool // id → allocated
}

// NewGPUPool hands out the devices ids (of one type, typ); ids must be distinct.
func NewGPUPool(ids []string, typ string) (*GPUPool, error) {
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id == "" || seen[id] {
			return nil, fmt.Errorf("GPU ids %q: empty or duplicate id %q", ids, id)
		}
		seen[id] = true
	}
	return &GPUPool{typ: typ, ids: slices.Clone(ids), inUse: make(map[string]bool, len(ids))}, nil
}

// Allocate takes req.Count free devices, or none and an error wrapping ErrNoGPU.
func (g *GPUPool) Allocate(req GPURequest) ([]string, error) {
	if req.Count == 0 {
		return nil, nil
	}
	if req.Count < 0 {
		return nil, fmt.Errorf("GPU count %d: %w", req.Count, ErrInvalidSpec)
	}
	if req.Type != "" && req.Type != g.typ {
		return nil, fmt.Errorf("%d GPU(s) of type %q: this host has %d of type %q: %w",
			req.Count, req.Type, len(g.ids), g.typ, ErrNoGPU)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var got []string
	for _, id := range g.ids {
		if len(got) == req.Count {
			break
		}
		if !g.inUse[id] {
			got = append(got, id)
		}
	}
	if len(got) < req.Count {
		return nil, fmt.Errorf("%d GPU(s): %d of %d free: %w", req.Count, len(got), len(g.ids), ErrNoGPU)
	}
	for _, id := range got {
		g.inUse[id] = true
	}
	return got, nil
}

// Release returns devices to the pool.
func (g *GPUPool) Release(ids []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		delete(g.inUse, id)
	}
}

// Free is how many devices are not allocated.
func (g *GPUPool) Free() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ids) - len(g.inUse)
}

// nvidiaGPU is one NVIDIA GPU as its driver describes it in
// /proc/driver/nvidia/gpus/<bus>/information.
type nvidiaGPU struct {
	bus   string // its PCI bus location, the directory's name (0000:18:00.0)
	minor int    // its device node is /dev/nvidia<minor>
	uuid  string // GPU-…, how CUDA and NVML name it wherever it is seen from
}

// nvidiaGPUs lists the GPUs the NVIDIA driver knows, read from procDir (/proc), in nvidia-smi's
// index order (PCI bus order). A host without the driver has none and no error.
//
// The index a user configures (nvidia-smi's), the node's minor number and the index CUDA gives a
// device are three numbers that agree on most hosts and not on all: a sandbox that sees only
// some devices numbers them from 0 again. So the provider binds the node by the minor number the
// driver gives and names the devices to CUDA by UUID, which means the same device everywhere.
func nvidiaGPUs(procDir string) ([]nvidiaGPU, error) {
	dir := filepath.Join(procDir, "driver", "nvidia", "gpus")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("NVIDIA GPUs: %w", err)
	}
	var gpus []nvidiaGPU
	for _, e := range entries { // ReadDir sorts by name: the bus order
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			return nil, fmt.Errorf("NVIDIA GPU %s: %w", e.Name(), err)
		}
		g := nvidiaGPU{bus: e.Name(), minor: -1}
		for line := range strings.Lines(string(b)) {
			key, val, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch val = strings.TrimSpace(val); strings.TrimSpace(key) {
			case "Device Minor":
				if g.minor, err = strconv.Atoi(val); err != nil || g.minor < 0 {
					return nil, fmt.Errorf("NVIDIA GPU %s: device minor %q", e.Name(), val)
				}
			case "GPU UUID":
				g.uuid = val
			}
		}
		if g.minor < 0 || !strings.HasPrefix(g.uuid, "GPU-") {
			return nil, fmt.Errorf("NVIDIA GPU %s: no device minor or UUID in its information", e.Name())
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// isIndex says whether a GPU id is an index (nvidia-smi's), not a UUID or a MIG device's id.
func isIndex(id string) bool { return id != "" && strings.Trim(id, "0123456789") == "" }

// resolveGPUs matches the configured GPU ids to the driver's GPUs: an index (nvidia-smi's) or a
// UUID. An id that names no GPU of a host with the driver is a configuration error, said at
// start rather than when a sandbox cannot use it. Other ids (MIG devices) and every id on a host
// without the driver stay unresolved: they keep today's meaning (/dev/nvidia<id>, and the id as
// CUDA_VISIBLE_DEVICES).
func resolveGPUs(ids []string, gpus []nvidiaGPU) (map[string]nvidiaGPU, error) {
	if len(gpus) == 0 || len(ids) == 0 {
		return nil, nil
	}
	out := make(map[string]nvidiaGPU, len(ids))
	for _, id := range ids {
		switch {
		case isIndex(id):
			i, err := strconv.Atoi(id)
			if err != nil || i >= len(gpus) {
				return nil, fmt.Errorf("GPU %q: this host's driver lists %d GPU(s), indexes 0 to %d (nvidia-smi -L)", id, len(gpus), len(gpus)-1)
			}
			out[id] = gpus[i]
		case strings.HasPrefix(id, "GPU-"):
			i := slices.IndexFunc(gpus, func(g nvidiaGPU) bool { return strings.EqualFold(g.uuid, id) })
			if i < 0 {
				return nil, fmt.Errorf("GPU %q: no GPU of this host has that UUID (nvidia-smi -L)", id)
			}
			out[id] = gpus[i]
		}
	}
	// Two ids of one GPU (its index and its UUID) would hand it to two sandboxes.
	byBus := map[string]string{}
	for _, id := range ids {
		if g, ok := out[id]; ok {
			if other, seen := byBus[g.bus]; seen {
				return nil, fmt.Errorf("GPUs %q and %q are the same GPU (%s)", other, id, g.uuid)
			}
			byBus[g.bus] = id
		}
	}
	return out, nil
}
