package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCgroupHost lays out the files setupCgroups reads: a cgroup2 mount at
// <dir>/cg, the worker in cgroup own, and the given files (path relative to
// the mount → content; a trailing "/" makes a directory, which fails writes
// the way a busy cgroup.subtree_control does).
func fakeCgroupHost(t *testing.T, own string, files map[string]string) (cgroupHost, string) {
	t.Helper()
	dir := t.TempDir()
	mount := filepath.Join(dir, "cg")
	for name, content := range files {
		p := filepath.Join(mount, name)
		if strings.HasSuffix(name, "/") {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(content), 0o644)
	}
	mountinfo := filepath.Join(dir, "mountinfo")
	os.WriteFile(mountinfo, []byte(
		"25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"+
			"36 25 0:30 / "+mount+" rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n"), 0o644)
	self := filepath.Join(dir, "cgroup")
	os.WriteFile(self, []byte("4:memory:/legacy\n0::"+own+"\n"), 0o644)
	return cgroupHost{mountinfo: mountinfo, selfCgroup: self, pid: 4242}, mount
}

func TestCgroupSetup(t *testing.T) {
	tests := []struct {
		name       string
		own        string
		files      map[string]string
		wantParent string // relative to the mount; "" means: not usable
		wantCPU    bool
		wantMoved  bool
		wantErr    string
	}{
		{
			name: "controllers already delegated to children are used in place",
			own:  "/",
			files: map[string]string{
				"cgroup.controllers": "cpuset cpu io memory pids", "cgroup.subtree_control": "cpu memory",
			},
			wantParent: ".", wantCPU: true,
		},
		{
			name: "a worker that moved into its leaf earlier uses the leaf's parent",
			own:  "/svc/" + workerLeaf,
			files: map[string]string{
				"svc/cgroup.subtree_control": "memory", workerLeaf + "/": "",
			},
			wantParent: "svc", wantMoved: true,
		},
		{
			name:    "no cpu or memory controller is not usable",
			own:     "/svc",
			files:   map[string]string{"svc/cgroup.controllers": "hugetlb", "svc/cgroup.subtree_control": ""},
			wantErr: "neither cpu nor memory",
		},
		{
			name: "a cgroup shared with other processes is left alone",
			own:  "/svc",
			files: map[string]string{
				"svc/cgroup.controllers": "cpu memory", "svc/cgroup.subtree_control/": "", "svc/cgroup.procs": "4242\n4243\n",
			},
			wantErr: "holds other processes",
		},
		{
			name: "a failed delegation moves the worker back",
			own:  "/svc",
			files: map[string]string{
				"svc/cgroup.controllers": "cpu memory", "svc/cgroup.subtree_control/": "", "svc/cgroup.procs": "4242\n",
			},
			wantErr: "enable +cpu +memory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, mount := fakeCgroupHost(t, tt.own, tt.files)
			m, err := setupCgroups(h)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("setupCgroups: %v, want an error mentioning %q", err, tt.wantErr)
				}
				if strings.Contains(tt.name, "moves the worker back") {
					// (Whether the leaf is removed again cannot be seen here: a
					// real cgroup directory can be removed with its interface
					// files in it, a fake one cannot.)
					procs, _ := os.ReadFile(filepath.Join(mount, "svc", "cgroup.procs"))
					if string(procs) != "4242" {
						t.Errorf("after a failed delegation the worker was not moved back: cgroup.procs = %q", procs)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("setupCgroups: %v", err)
			}
			if want := filepath.Join(mount, tt.wantParent); m.parent != want || m.cpu != tt.wantCPU || !m.memory || m.moved != tt.wantMoved {
				t.Errorf("setupCgroups = %+v, want parent %s, cpu %v, memory, moved %v", m, want, tt.wantCPU, tt.wantMoved)
			}
		})
	}
}

func TestSandboxCgroupGetsTheLimitsAskedFor(t *testing.T) {
	tests := []struct {
		name string
		res  Resources
		want map[string]string // file → content; "" means absent
	}{
		{"one and a half cores and 64 MiB", Resources{CPU: 1.5, MemoryMB: 64},
			map[string]string{"cpu.max": "150000 100000", "memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1"}},
		{"a sliver of a core is at least 1%", Resources{CPU: 0.001},
			map[string]string{"cpu.max": "1000 100000", "memory.max": ""}},
		{"no limits writes none", Resources{},
			map[string]string{"cpu.max": "", "memory.max": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &cgroupManager{parent: t.TempDir(), cpu: true, memory: true}
			cg, err := m.create("sandbox-x", tt.res)
			if err != nil {
				t.Fatal(err)
			}
			for file, want := range tt.want {
				got, err := os.ReadFile(filepath.Join(cg.dir, file))
				if (want == "") != os.IsNotExist(err) || (want != "" && string(got) != want) {
					t.Errorf("%s = %q (%v), want %q", file, got, err, want)
				}
			}
			cg.fd.Close()
		})
	}
}

func TestBubblewrapArguments(t *testing.T) {
	gpuInfo := &gpuInfoMask{dir: "/proc/driver/nvidia/gpus", keep: []string{"0000:19:00.0"}}
	args := strings.Join(bwrapArgs("/r/w", Spec{}, bwrapMounts{roBinds: []string{"/opt/env"}, devNodes: []string{"/dev/nvidia0"}, hide: "/r", gpuInfo: gpuInfo}, 3, 0), " ")
	order := []string{"--ro-bind / /", "--dev /dev", "--proc /proc", "--tmpfs /tmp", "--unshare-net", "--ro-bind /opt/env /opt/env", "--tmpfs /r",
		"--dev-bind /dev/nvidia0 /dev/nvidia0",
		// the driver's list of GPUs shows only the sandbox's own
		"--tmpfs /proc/driver/nvidia/gpus", "--ro-bind /proc/driver/nvidia/gpus/0000:19:00.0 /proc/driver/nvidia/gpus/0000:19:00.0",
		"--bind /r/w /r/w", "--info-fd 3"}
	last := -1
	for _, a := range order {
		i := strings.Index(args, a)
		if i <= last {
			t.Errorf("%q missing or out of order in %q: later mounts must cover earlier ones", a, args)
		}
		last = i
	}
	if !strings.HasSuffix(args, " --") {
		t.Errorf("%q does not end with --, before the command", args)
	}
	for _, a := range []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"} {
		if !strings.Contains(args, a) {
			t.Errorf("%q missing from %q", a, args)
		}
	}
	// A sandbox allowed the network has a namespace of its own too: its way out is the egress
	// proxy its caller serves on Spec.Listen, never the worker's network.
	if allowed := strings.Join(bwrapArgs("/r/w", Spec{Network: true}, bwrapMounts{}, 0, 0), " "); !strings.Contains(allowed, "--unshare-net") {
		t.Errorf("Network: true shares the worker's network: %q", allowed)
	}
}
