package sandbox

import (
	"fmt"
	"slices"
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
