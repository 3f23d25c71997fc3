package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
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

// fakeDriver writes the NVIDIA driver's GPU list under a stand-in for /proc: the GPUs in bus
// order, each with its minor and UUID "GPU-<minor>".
func fakeDriver(t *testing.T, minors ...int) string {
	t.Helper()
	proc := t.TempDir()
	for i, minor := range minors {
		dir := filepath.Join(proc, "driver", "nvidia", "gpus", fmt.Sprintf("0000:%02x:00.0", 0x18+i))
		os.MkdirAll(dir, 0o755)
		info := fmt.Sprintf("Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t GPU-%d\n"+
			"Bus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n", minor, filepath.Base(dir), minor)
		os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o644)
	}
	return proc
}

func TestConfiguredGPUsAreMatchedToTheDriversGPUs(t *testing.T) {
	// Bus order 18, 19, 1a; their minors 0, 2, 1: nvidia-smi index 1 is /dev/nvidia2.
	gpus, err := nvidiaGPUs(fakeDriver(t, 0, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []nvidiaGPU{{"0000:18:00.0", 0, "GPU-0"}, {"0000:19:00.0", 2, "GPU-2"}, {"0000:1a:00.0", 1, "GPU-1"}}
	if !slices.Equal(gpus, want) {
		t.Fatalf("nvidiaGPUs = %+v, want %+v", gpus, want)
	}
	tests := []struct {
		ids     []string
		want    map[string]nvidiaGPU
		wantErr string
	}{
		{[]string{"1", "2"}, map[string]nvidiaGPU{"1": want[1], "2": want[2]}, ""},
		{[]string{"GPU-1", "MIG-abc"}, map[string]nvidiaGPU{"GPU-1": want[2]}, ""},
		{[]string{"3"}, nil, `GPU "3": this host's driver lists 3 GPU(s), indexes 0 to 2`},
		{[]string{"GPU-7"}, nil, `GPU "GPU-7": no GPU of this host has that UUID`},
		{[]string{"2", "GPU-1"}, nil, `GPUs "2" and "GPU-1" are the same GPU`},
	}
	for _, tt := range tests {
		got, err := resolveGPUs(tt.ids, gpus)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("resolveGPUs(%q) = %v, want an error with %q", tt.ids, err, tt.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tt.want) {
			t.Errorf("resolveGPUs(%q) = %+v, %v; want %+v", tt.ids, got, err, tt.want)
		}
		for id, g := range tt.want {
			if got[id] != g {
				t.Errorf("resolveGPUs(%q)[%q] = %+v, want %+v", tt.ids, id, got[id], g)
			}
		}
	}
	if gpus, err := nvidiaGPUs(t.TempDir()); gpus != nil || err != nil {
		t.Errorf("a host without the driver: nvidiaGPUs = %+v, %v; want none and no error", gpus, err)
	}
	t.Run("a provider refuses a GPU its host does not have", func(t *testing.T) {
		_, err := NewProcess(ProcessOptions{Root: t.TempDir(), Isolation: IsolationNone, GPUs: []string{"0", "3"}, procDir: fakeDriver(t, 0, 1)})
		if err == nil || !strings.Contains(err.Error(), `GPU "3"`) {
			t.Errorf("NewProcess with GPU 3 of 2: %v, want an error naming it", err)
		}
	})
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
			tests := []struct {
				name      string
				minors    []int // the driver's GPUs in bus order; none: no driver to read
				count     int
				wantEnv   string
				wantNodes string // under bubblewrap
			}{
				{"two GPUs, named by UUID, their nodes by minor", []int{0, 2, 1}, 2, "GPU-0,GPU-2 GPU-0,GPU-2",
					"/dev/nvidia-uvm /dev/nvidia0 /dev/nvidia2 /dev/nvidiactl"},
				{"without the driver's list, by id", nil, 2, "0,1 0,1", "/dev/nvidia-uvm /dev/nvidia0 /dev/nvidia1 /dev/nvidiactl"},
				{"no GPUs hides them all", []int{0, 2, 1}, 0, " void", ""},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					p := newProvider(t, iso, func(o *ProcessOptions) {
						o.GPUs, o.GPUType, o.procDir = []string{"0", "1", "2"}, "h100", fakeDriver(t, tt.minors...)
					})
					p.devDir = dev
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

// gpuProbe is what a sandbox on a real GPU host says it sees.
type gpuProbe struct {
	SMI   []string `json:"smi"`   // nvidia-smi's GPU UUIDs
	Info  []string `json:"info"`  // the driver's per-GPU entries in /proc
	CUDA  []string `json:"cuda"`  // the UUIDs of the devices CUDA (through PyTorch) opens
	Sum   float64  `json:"sum"`   // a sum computed on the first of them (0 without one)
	Unset int      `json:"unset"` // devices CUDA opens with CUDA_VISIBLE_DEVICES unset (-1: not asked)
}

// probeScript prints a gpuProbe; without PyTorch (torch false) CUDA is not asked.
func probeScript(torch, unset bool) string {
	cuda := `[]`
	if torch {
		cuda = `"$(python3 -c 'import torch,json; n=torch.cuda.device_count(); print(json.dumps(["GPU-"+str(torch.cuda.get_device_properties(i).uuid) for i in range(n)]))')"`
	}
	sum := `0`
	if torch {
		sum = `"$(python3 -c 'import torch; print(torch.ones(1024, 1024, device="cuda").sum().item() if torch.cuda.device_count() else 0)')"`
	}
	unsetCount := `-1`
	if torch && unset {
		unsetCount = `"$(env -u CUDA_VISIBLE_DEVICES python3 -c 'import torch; print(torch.cuda.device_count())')"`
	}
	return `smi=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | grep '^GPU-' | sed 's/.*/"&"/' | paste -sd, -)
info=$(ls /proc/driver/nvidia/gpus 2>/dev/null | sed 's/.*/"&"/' | paste -sd, -)
echo "{\"smi\": [$smi], \"info\": [$info], \"cuda\": ` + cuda + `, \"sum\": ` + sum + `, \"unset\": ` + unsetCount + `}"`
}

// TestARealGPUIsGivenWholeOrNotAtAll proves on a host with NVIDIA GPUs and their driver what the
// stand-ins above can only suggest: a sandbox sees, opens and computes on exactly the GPUs it was
// given, and a sandbox given none opens none, under bubblewrap even when it clears
// CUDA_VISIBLE_DEVICES itself. It skips on a host without them (CI has none); the device check
// of issue 47 ran it on an H200. With PyTorch on the host it also computes there.
func TestARealGPUIsGivenWholeOrNotAtAll(t *testing.T) {
	gpus, err := nvidiaGPUs("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) == 0 {
		t.Skip("no NVIDIA GPU and driver on this host")
	}
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		t.Skip("no nvidia-smi on this host")
	}
	torch := exec.Command("python3", "-c", "import torch").Run() == nil
	var ids, uuids, buses []string
	for i, g := range gpus {
		ids, uuids, buses = append(ids, fmt.Sprint(i)), append(uuids, g.uuid), append(buses, g.bus)
	}
	env := map[string]string{}
	if v, ok := os.LookupEnv("LD_LIBRARY_PATH"); ok { // where the host keeps the driver's libraries
		env["LD_LIBRARY_PATH"] = v
	}
	probe := func(t *testing.T, p *Process, res Resources, unset bool) gpuProbe {
		t.Helper()
		count := res.GPU.Count
		sb := start(t, p, Spec{Command: []string{"sh", "-c", probeScript(torch, unset)}, Env: env, Resources: res})
		sb.Stdin().Close()
		out, _ := io.ReadAll(sb.Stdout())
		if code := exitCode(t, sb); code != 0 {
			t.Fatalf("probe exited %d: %s; stderr %q", code, out, sb.logs.Tail(10))
		}
		var got gpuProbe
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("probe said %q: %v; stderr %q", out, err, sb.logs.Tail(10))
		}
		t.Logf("given %d GPUs, %d MB: %+v", count, res.MemoryMB, got)
		return got
	}
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	checkCUDA := func(t *testing.T, got gpuProbe, want []string) {
		t.Helper()
		if !torch {
			return
		}
		if !slices.Equal(sorted(got.CUDA), sorted(want)) {
			t.Errorf("CUDA opens %q, want %q", got.CUDA, want)
		}
		if wantSum := float64(1024 * 1024); len(want) > 0 && got.Sum != wantSum {
			t.Errorf("a sum on the GPU = %v, want %v", got.Sum, wantSum)
		}
	}
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso, func(o *ProcessOptions) { o.GPUs, o.GPUType, o.procDir = ids, "test", "/proc" })
			t.Run("every GPU", func(t *testing.T) {
				got := probe(t, p, Resources{GPU: GPURequest{Count: len(ids)}}, iso == IsolationBubblewrap)
				checkCUDA(t, got, uuids)
				if iso == IsolationBubblewrap {
					if !slices.Equal(sorted(got.SMI), sorted(uuids)) || !slices.Equal(got.Info, buses) {
						t.Errorf("nvidia-smi lists %q and /proc %q; want %q and %q", got.SMI, got.Info, uuids, buses)
					}
					if torch && got.Unset != len(ids) {
						t.Errorf("with CUDA_VISIBLE_DEVICES unset CUDA opens %d, want %d", got.Unset, len(ids))
					}
				}
			})
			t.Run("none", func(t *testing.T) {
				got := probe(t, p, Resources{}, iso == IsolationBubblewrap)
				checkCUDA(t, got, nil)
				if iso == IsolationBubblewrap {
					if len(got.SMI) != 0 || len(got.Info) != 0 {
						t.Errorf("nvidia-smi lists %q and /proc %q; want nothing", got.SMI, got.Info)
					}
					if torch && got.Unset != 0 {
						t.Errorf("a sandbox given no GPU opens %d once it unsets CUDA_VISIBLE_DEVICES", got.Unset)
					}
				}
			})
		})
	}
	t.Run("the last GPU alone", func(t *testing.T) {
		// On a host of several, a sandbox given one that is not the first: its index is not
		// CUDA's inside, its UUID is.
		last := len(gpus) - 1
		p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.GPUs, o.GPUType, o.procDir = []string{ids[last]}, "test", "/proc" })
		got := probe(t, p, Resources{GPU: GPURequest{Count: 1}}, true)
		checkCUDA(t, got, uuids[last:])
		if !slices.Equal(got.SMI, uuids[last:]) || !slices.Equal(got.Info, buses[last:]) {
			t.Errorf("nvidia-smi lists %q and /proc %q; want %q and %q", got.SMI, got.Info, uuids[last:], buses[last:])
		}
	})
	t.Run("under a memory rlimit", func(t *testing.T) {
		// Where cgroups are not delegated memory is bounded by RLIMIT_DATA: CUDA must still start.
		p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.GPUs, o.GPUType, o.Limiter, o.procDir = ids, "test", LimiterRlimit, "/proc" })
		got := probe(t, p, Resources{GPU: GPURequest{Count: len(ids)}, MemoryMB: 8192}, false)
		checkCUDA(t, got, uuids)
	})
}

func TestAnUnisolatedGPUSandboxSharesTheHostsPidsAndStillStopsWhole(t *testing.T) {
	p := newProvider(t, IsolationNone, func(o *ProcessOptions) { o.GPUs, o.GPUType = []string{"0"}, "h100" })
	if !p.pidNS {
		t.Skip("no pid namespaces here")
	}
	for _, count := range []int{0, 1} {
		sb := start(t, p, Spec{ID: fmt.Sprint("pids", count), Command: []string{"sh", "-c", `sleep 300 & echo $$ $!; wait`},
			Resources: Resources{GPU: GPURequest{Count: count}}})
		line, err := bufio.NewReader(sb.Stdout()).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var self, child int
		fmt.Sscan(line, &self, &child)
		// With a GPU the host's pids, whose /proc it sees (CUDA needs them to agree); without,
		// a namespace of its own where it is pid 1.
		if ownNS := self == 1; ownNS != (count == 0) {
			t.Errorf("given %d GPUs the sandbox is pid %d: own pid namespace %v, want %v", count, self, ownNS, count == 0)
		}
		if count == 1 {
			if err := sb.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil && !strings.Contains(string(b), ") Z") {
				t.Errorf("its background child %d outlived Stop: %s", child, b)
			}
		}
	}
}
