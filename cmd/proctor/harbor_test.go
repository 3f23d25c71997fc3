package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/internal/testenv"
)

// harborBase is the base image the tests build the Harbor examples FROM (they default to
// ubuntu:24.04, which no registry here serves): the host's bash with its libraries and busybox's
// tools, made in the build workers' storage.
const harborBase = "localhost/harbor-base:1"

// makeHarborBase builds harborBase into the buildah storage of the builds under buildDir.
func makeHarborBase(t *testing.T, buildDir string) {
	t.Helper()
	for _, tool := range []string{"buildah", "runc", "busybox", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.MissingTool(t, tool)
		}
	}
	ctxDir := t.TempDir()
	root := filepath.Join(ctxDir, "root")
	bash, _ := exec.LookPath("bash")
	busybox, _ := exec.LookPath("busybox")
	files := []string{bash, busybox}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Fatalf("ldd bash: %v", err)
	}
	for _, m := range regexp.MustCompile(`(?m)(/\S+\.so[.\d]*)`).FindAllString(string(out), -1) {
		files = append(files, m)
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if f == bash || f == busybox {
			dst = filepath.Join(root, "bin", filepath.Base(f))
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "bash" && applet != "busybox" {
			os.Symlink("busybox", filepath.Join(root, "bin", applet))
		}
	}
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	for _, d := range []string{"tmp", "root", "usr/bin"} {
		os.MkdirAll(filepath.Join(root, d), 0o1777)
	}
	os.Symlink("/bin/bash", filepath.Join(root, "usr", "bin", "bash"))
	os.Symlink("/bin/busybox", filepath.Join(root, "usr", "bin", "env"))
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM scratch\nCOPY root/ /\nENV PATH=/usr/bin:/bin\n"), 0o644)
	args, env, err := activities.Buildah(buildDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("buildah", append(args, "bud", "--isolation", "oci", "-t", harborBase, ctxDir)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the Harbor examples' base image: %v\n%s", err, out)
	}
}

// TestHarborTasksRunInContainers imports the Harbor examples (examples/harbor) into dev with the
// container provider (podman), as a user would with `proctor tasks import harbor`, and runs them:
// every valid task reaches 1.0 with the oracle (its solution/solve.sh, then its tests), an idle
// agent scores 0, the task whose tests write both reward files ends in error as a task fault,
// and the task that needs what Proctor does not honour yet is refused at import, saying why.
func TestHarborTasksRunInContainers(t *testing.T) {
	t.Parallel()
	host := testenv.ContainerEngine(t)
	dataDir := t.TempDir()
	makeHarborBase(t, filepath.Join(dataDir, "builds"))
	owner := "harbor-" + filepath.Base(dataDir)
	dev := startDev(t, dataDir, "--sandbox-provider", "container", "--container-host", host, "--container-owner", owner,
		"--shell-server", testenv.StaticProgram(t, "cmd/proctor-shell"), "--agent-relay", testenv.StaticProgram(t, "cmd/proctor-relay"))
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	examples := filepath.Join(testenv.ModuleRoot(t), "examples", "harbor")

	importArgs := []string{"tasks", "import", "harbor", examples, "--taskset", "harbor-examples", "--build-arg", "BASE_IMAGE=" + harborBase}
	out, err := c.cli(importArgs...)
	if err == nil || !strings.Contains(err.Error(), "1 of 6 tasks refused") {
		t.Fatalf("import: %v, want the one refusal\n%s", err, out)
	}
	for _, want := range []string{
		`proctor/api-token\s+refused: environment.env: variables resolved at run time are not supported yet`,
		`6 tasks: 5 imported into harbor-examples \(5 created, 0 updated, 0 unchanged\), 1 refused; 3 builds made, 2 tasks on a shared build`,
		`proctor/hello-world\s+imported`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	// Again, unchanged: no build, no new task version.
	out, _ = c.cli(importArgs...)
	if !strings.Contains(out, "(0 created, 0 updated, 5 unchanged), 1 refused; 0 builds made, 5 tasks on a shared build") {
		t.Errorf("an unchanged re-import:\n%s", out)
	}

	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	idle := c.resolve("/v2/models/resolve?model=idle", "id")
	for _, m := range []struct {
		name, id string
		want     map[string]string // task → "reward" or "error: …"
	}{
		{"oracle", oracle, map[string]string{"proctor/hello-world": "1", "proctor/log-census": "1", "proctor/inventory-report": "1", "proctor/offline-check": "1",
			"proctor/two-rewards": "error: task fault: the verifier wrote both reward.txt and reward.json"}},
		{"idle", idle, map[string]string{"proctor/hello-world": "0", "proctor/log-census": "0", "proctor/inventory-report": "0", "proctor/offline-check": "0",
			"proctor/two-rewards": "error: task fault: the verifier wrote both"}},
	} {
		var launched struct {
			JobID string `json:"job_id"`
		}
		if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("harbor-examples"), "model_ids": []string{m.id},
			"max_concurrent": 5, "name": "harbor " + m.name}, &launched); code != 201 {
			t.Fatalf("run_list = %d", code)
		}
		c.waitJob(launched.JobID, nil)
		got := map[string]string{}
		var lines []string
		for _, tr := range c.traces(launched.JobID) {
			switch {
			case tr.Status == "completed" && tr.Reward != nil:
				got[tr.Name] = strconv.FormatFloat(*tr.Reward, 'g', -1, 64)
			case tr.Status == "error":
				got[tr.Name] = "error: " + tr.Error
			default:
				got[tr.Name] = tr.Status
			}
			lines = append(lines, tr.Name+" = "+got[tr.Name])
		}
		sort.Strings(lines)
		for task, want := range m.want {
			if g := got[task]; g != want && !(strings.HasPrefix(want, "error: ") && strings.Contains(g, strings.TrimPrefix(want, "error: "))) {
				t.Errorf("%s on %s = %q, want %q\nall: %s", m.name, task, g, want, strings.Join(lines, "\n"))
			}
		}
	}
}
