package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestGPUPoolAllocation(t *testing.T) {
	ids := []string{"0", "1", "2", "3"}
	tests := []struct {
		name    string
		held    int // devices already taken (one request of this count)
		req     GPURequest
		want    []string
		wantErr error
	}{
		{"no GPUs asked, none given", 0, GPURequest{}, nil, nil},
		{"any type gets whole distinct devices in order", 0, GPURequest{Count: 2}, []string{"0", "1"}, nil},
		{"the host's type gets them", 0, GPURequest{Count: 1, Type: "h100"}, []string{"0"}, nil},
		{"all of them", 0, GPURequest{Count: 4}, ids, nil},
		{"a held device is not given again", 3, GPURequest{Count: 1}, []string{"3"}, nil},
		{"another type gets ErrNoGPU", 0, GPURequest{Count: 1, Type: "a100"}, nil, ErrNoGPU},
		{"more than the host has gets ErrNoGPU", 0, GPURequest{Count: 5}, nil, ErrNoGPU},
		{"more than are free gets ErrNoGPU", 3, GPURequest{Count: 2}, nil, ErrNoGPU},
		{"a negative count is invalid", 0, GPURequest{Count: -1}, nil, ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, err := NewGPUPool(ids, "h100")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Allocate(GPURequest{Count: tt.held}); err != nil {
				t.Fatal(err)
			}
			got, err := pool.Allocate(tt.req)
			if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
				t.Errorf("allocate(%+v) with %d held = %q, %v; want %q, %v", tt.req, tt.held, got, err, tt.want, tt.wantErr)
			}
			if wantFree := len(ids) - tt.held - len(tt.want); pool.Free() != wantFree {
				t.Errorf("free() = %d, want %d", pool.Free(), wantFree)
			}
		})
	}
	t.Run("a host without GPUs gives none", func(t *testing.T) {
		pool, _ := NewGPUPool(nil, "")
		if _, err := pool.Allocate(GPURequest{Count: 1}); !errors.Is(err, ErrNoGPU) {
			t.Errorf("allocate: %v, want ErrNoGPU", err)
		}
	})
	t.Run("duplicate ids are refused", func(t *testing.T) {
		if _, err := NewGPUPool([]string{"0", "0"}, "h100"); err == nil {
			t.Error("newGPUPool accepted a duplicate id")
		}
	})
}

func TestConcurrentGPURequestsNeverShareADevice(t *testing.T) {
	const gpus, tries = 4, 24
	ids := []string{"0", "1", "2", "3"}
	p := newProvider(t, IsolationNone, func(o *ProcessOptions) {
		o.GPUs, o.GPUType, o.MaxSandboxes = ids, "h100", 100
	})
	for round := range 3 { // release and take again
		var mu sync.Mutex
		var got []Sandbox
		noGPU := 0
		var wg sync.WaitGroup
		for i := range tries {
			wg.Go(func() {
				sb, err := p.Start(t.Context(), Spec{ID: fmt.Sprint("gpu", i), Command: []string{"sleep", "300"},
					Resources: Resources{GPU: GPURequest{Count: 1, Type: "h100"}}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					got = append(got, sb)
				case errors.Is(err, ErrNoGPU):
					noGPU++
				default:
					t.Errorf("Start: %v", err)
				}
			})
		}
		wg.Wait()
		var devices []string
		for _, sb := range got {
			devices = append(devices, sb.Devices()...)
		}
		slices.Sort(devices)
		if !slices.Equal(devices, ids) || noGPU != tries-gpus {
			t.Errorf("round %d: %d Starts got devices %q and %d ErrNoGPU; want each of %q once and %d ErrNoGPU",
				round, tries, devices, noGPU, ids, tries-gpus)
		}
		for _, sb := range got {
			if err := sb.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if p.FreeGPUs() != gpus || p.Running() != 0 {
			t.Fatalf("round %d: after Stop FreeGPUs() = %d, Running() = %d; want %d and 0", round, p.FreeGPUs(), p.Running(), gpus)
		}
	}
}

func TestGPUsAreVisibleInsideTheSandbox(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			// Stand-ins for the device nodes; bubblewrap binds files as it
			// binds character devices.
			dev := t.TempDir()
			for _, n := range []string{"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"} {
				os.WriteFile(filepath.Join(dev, n), nil, 0o644)
			}
			p := newProvider(t, iso, func(o *ProcessOptions) { o.GPUs, o.GPUType = []string{"0", "1", "2"}, "h100" })
			p.devDir = dev
			tests := []struct {
				name      string
				count     int
				wantEnv   string
				wantNodes string // under bubblewrap
			}{
				{"two GPUs", 2, "0,1 0,1", "/dev/nvidia-uvm /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl"},
				{"no GPUs hides them all", 0, " void", ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					out, sb := run(t, p, Spec{
						Command:   []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES"; echo $(ls /dev/nvidia* 2>/dev/null)`},
						Env:       map[string]string{"CUDA_VISIBLE_DEVICES": "spoofed"},
						Resources: Resources{GPU: GPURequest{Count: tt.count}},
					})
					lines := strings.Split(out, "\n")
					if lines[0] != tt.wantEnv {
						t.Errorf("CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES = %q, want %q", lines[0], tt.wantEnv)
					}
					if len(sb.Devices()) != tt.count {
						t.Errorf("Devices() = %q, want %d", sb.Devices(), tt.count)
					}
					if iso == IsolationBubblewrap && lines[1] != tt.wantNodes {
						t.Errorf("device nodes inside = %q, want %q", lines[1], tt.wantNodes)
					}
				})
			}
		})
	}
}
