package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/proctorhq/proctor/internal/config"
)

// helm is the pinned Helm the chart is linted and rendered with (built by `go run`, cached).
const helm = "helm.sh/helm/v3/cmd/helm@v3.20.2"

// proctorEnv is every PROCTOR_* variable the configuration reads.
var proctorEnv = sync.OnceValue(func() map[string]bool {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	new(config.Config).Bind(fs)
	names := map[string]bool{}
	re := regexp.MustCompile(`\(env (PROCTOR_[A-Z0-9_]+)\)`)
	fs.VisitAll(func(f *flag.Flag) {
		for _, m := range re.FindAllStringSubmatch(f.Usage, -1) {
			names[m[1]] = true
		}
	})
	return names
})

// checkProctorArgs fails unless args are a proctor command line the binary accepts: a command
// that exists, with flags it has, holding values they parse.
func checkProctorArgs(t *testing.T, where string, args []string) {
	t.Helper()
	root := newRoot(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Errorf("%s: %q is not a proctor command: %v", where, args, err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: proctor %s: %v", where, strings.Join(args, " "), err)
	}
}

func checkProctorEnv(t *testing.T, where string, names []string) {
	t.Helper()
	known := proctorEnv()
	for _, n := range names {
		if strings.HasPrefix(n, "PROCTOR_") && !known[n] {
			t.Errorf("%s sets %s, which proctor does not read", where, n)
		}
	}
}

// TestComposeFile loads deploy/compose.yaml as Compose does (the compose-spec loader: schema,
// interpolation, anchors, dependencies) and checks that every proctor service runs a real
// command with real flags and settings.
func TestComposeFile(t *testing.T) {
	env := []string{"POSTGRES_PASSWORD=pw", "PROCTOR_SIGNING_KEY=sk"}
	load := func(env []string, profiles ...string) (*cli.ProjectOptions, error) {
		return cli.NewProjectOptions([]string{filepath.Join("..", "..", "deploy", "compose.yaml")},
			cli.WithEnv(env), cli.WithProfiles(profiles), cli.WithDiscardEnvFile)
	}
	opts, err := load(env, "setup")
	if err != nil {
		t.Fatal(err)
	}
	project, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	var names []string
	for name := range project.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"builder", "keys", "migrate", "postgres", "server", "temporal", "temporal-ui", "worker"}; !slices.Equal(names, want) {
		t.Errorf("services %v, want %v", names, want)
	}
	for name, svc := range project.Services {
		if !strings.HasPrefix(svc.Image, "proctor") {
			continue
		}
		var vars []string
		for k := range svc.Environment {
			vars = append(vars, k)
		}
		checkProctorEnv(t, "compose service "+name, vars)
		args := []string(svc.Command)
		if name == "migrate" {
			// sh -c "proctor migrate && proctor admin temporal setup …"
			for _, line := range strings.Split(svc.Entrypoint[len(svc.Entrypoint)-1], "&&") {
				checkProctorArgs(t, "compose service migrate", strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "proctor ")))
			}
			continue
		}
		checkProctorArgs(t, "compose service "+name, args)
		if svc.HealthCheck != nil && len(svc.HealthCheck.Test) > 2 && svc.HealthCheck.Test[1] == "proctor" {
			checkProctorArgs(t, "compose service "+name+"'s health check", svc.HealthCheck.Test[2:])
		}
	}
	if dep, ok := project.Services["server"].DependsOn["migrate"]; !ok || dep.Condition != "service_completed_successfully" {
		t.Errorf("the server must wait for the migrations: %+v", project.Services["server"].DependsOn)
	}
	if u := project.Services["server"].Environment["PROCTOR_DATABASE_URL"]; u == nil || !strings.Contains(*u, ":pw@postgres:5432/") {
		t.Errorf("the database URL is not interpolated: %v", u)
	}

	// Without its secrets, Compose refuses to start and says where to set them.
	opts, err = load([]string{"POSTGRES_PASSWORD=pw"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opts.LoadProject(t.Context()); err == nil || !strings.Contains(err.Error(), "set PROCTOR_SIGNING_KEY in deploy/.env") {
		t.Errorf("compose without PROCTOR_SIGNING_KEY: %v", err)
	}
}

// TestHelmChart lints and renders the chart with the pinned Helm, with its defaults and with the
// example production values (a GPU pool, a ServiceMonitor), checks each manifest strictly
// against the Kubernetes API types (unknown fields and wrong types fail), and checks what a
// deployment relies on: commands and settings proctor has, probes, drains, PDBs, no service
// account token, GPU requests on the GPU pool.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to run the pinned helm")
	}
	chart := filepath.Join("..", "..", "deploy", "helm", "proctor")
	examples := filepath.Join("..", "..", "deploy", "helm", "examples", "production.yaml")
	required := []string{"--set", "secrets.databaseURL=postgres://p:pw@db:5432/proctor", "--set", "secrets.signingKey=k"}
	helmRun := func(args ...string) (string, error) {
		cmd := exec.Command("go", append([]string{"run", helm}, args...)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String(), err
	}
	if out, err := helmRun(append([]string{"lint", "--strict", chart}, required...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The values schema refuses what the chart cannot run.
	for _, bad := range [][]string{
		{"--set", "config.blobURL=s3://bucket"},
		{"--set", "workers[0].name=cpu,workers[0].queues=sandboxes-gpu,workers[0].replicas=1"},
		{"--set", "worker.shutdownTimeout=1m"},
	} {
		if _, err := helmRun(append(append([]string{"template", "rel", chart}, required...), bad...)...); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("values %v: %v, want the schema to refuse them", bad, err)
		}
	}
	if _, err := helmRun("template", "rel", chart); err == nil || !strings.Contains(err.Error(), "secrets.databaseURL is required") {
		t.Errorf("a chart without a database: %v", err)
	}

	podsExample := filepath.Join("..", "..", "deploy", "helm", "examples", "kubernetes-sandboxes.yaml")
	for _, c := range []struct {
		name        string
		args        []string
		deployments int
	}{
		// Server, workflows, cpu and builds workers; the example adds a GPU pool; the pods
		// example has workflows, builds and two pools that run sandboxes as pods.
		{"defaults", required, 4},
		{"production example", []string{"-f", examples}, 5},
		{"sandboxes as pods", []string{"-f", examples, "-f", podsExample}, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := helmRun(append([]string{"template", "rel", chart, "--namespace", "evals"}, c.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeManifests(t, out)
			checkChart(t, objs, c.deployments)
			// The pods example asks for user namespaces; the default does not.
			if got, want := strings.Count(out, "- --kube-user-namespaces"), map[bool]int{true: 2}[c.name == "sandboxes as pods"]; got != want {
				t.Errorf("%d workers run sandbox pods in user namespaces, want %d", got, want)
			}
		})
	}
}

// decodeManifests splits rendered YAML and decodes each document strictly into its API type.
func decodeManifests(t *testing.T, rendered string) []kruntime.Object {
	t.Helper()
	strict := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{Yaml: true, Strict: true})
	r := kyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered)))
	var objs []kruntime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "" {
			continue
		}
		if head.APIVersion == "monitoring.coreos.com/v1" && head.Kind == "ServiceMonitor" {
			// The Prometheus Operator's type is not in client-go: held to the fields it has.
			var sm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					Selector  struct{ MatchLabels map[string]string } `json:"selector"`
					Endpoints []struct {
						Port, Path, Interval string
					} `json:"endpoints"`
				} `json:"spec"`
			}
			// One endpoint, the metrics port the server's and the workers' services both name: never
			// the API's port, which serves metrics only with the metrics token.
			if err := yaml.UnmarshalStrict(doc, &sm); err != nil || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "metrics" ||
				sm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "proctor" {
				t.Errorf("ServiceMonitor: %v %+v", err, sm)
			}
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			t.Errorf("%s %s is not valid: %v\n%s", head.APIVersion, head.Kind, err, doc)
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

func checkChart(t *testing.T, objs []kruntime.Object, wantDeployments int) {
	t.Helper()
	type pod struct {
		name string
		spec corev1.PodSpec
	}
	var pods []pod
	kinds := map[string]int{}
	pdbs := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			kinds["Deployment"]++
			pods = append(pods, pod{o.Name, o.Spec.Template.Spec})
		case *batchv1.Job:
			kinds["Job"]++
			pods = append(pods, pod{o.Name, o.Spec.Template.Spec})
		case *policyv1.PodDisruptionBudget:
			kinds["PodDisruptionBudget"]++
			pdbs[o.Name] = true
		case *corev1.ServiceAccount:
			if !strings.HasSuffix(o.Name, "-sandbox-manager") && (o.AutomountServiceAccountToken == nil || *o.AutomountServiceAccountToken) {
				t.Errorf("service account %s mounts a token", o.Name)
			}
		case *rbacv1.Role:
			kinds["Role"]++
			var rules []string
			for _, r := range o.Rules {
				rules = append(rules, strings.Join(r.Resources, ",")+":"+strings.Join(r.Verbs, ","))
			}
			if o.Namespace != "evals-sandboxes" || !slices.Equal(rules, []string{"pods:create,delete,get,list,watch", "pods/attach:create,get", "pods/portforward:create,get", "pods/ephemeralcontainers:patch,update", "networkpolicies:create,get,update"}) {
				t.Errorf("the sandbox manager's role in %s: %v", o.Namespace, rules)
			}
		case *rbacv1.RoleBinding:
			kinds["RoleBinding"]++
			if len(o.Subjects) != 1 || o.Subjects[0].Name != "rel-proctor-sandbox-manager" || o.Subjects[0].Namespace != "evals" || o.RoleRef.Name != "rel-proctor-sandbox-manager" {
				t.Errorf("the sandbox manager's binding: %+v", o)
			}
		default:
			kinds[fmt.Sprintf("%T", o)]++
		}
	}
	if kinds["Deployment"] != wantDeployments || kinds["Job"] != 1 || kinds["PodDisruptionBudget"] != wantDeployments {
		t.Errorf("rendered %v, want %d Deployments with a PDB each and a migration Job", kinds, wantDeployments)
	}

	podWorkers := 0
	for _, p := range pods {
		// Only workers that create sandbox pods hold a token: of the sandbox manager's account.
		createsPods := slices.Contains(p.spec.Containers[0].Args, "kubernetes")
		if createsPods {
			podWorkers++
			if p.spec.ServiceAccountName != "rel-proctor-sandbox-manager" || p.spec.AutomountServiceAccountToken == nil || !*p.spec.AutomountServiceAccountToken {
				t.Errorf("%s creates pods as %s (token %v)", p.name, p.spec.ServiceAccountName, p.spec.AutomountServiceAccountToken)
			}
		} else if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts a service account token", p.name)
		}
		if !strings.Contains(p.name, "migrate") && !pdbs[p.name] {
			t.Errorf("%s has no PodDisruptionBudget", p.name)
		}
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			checkProctorArgs(t, p.name+"/"+c.Name, c.Args)
			var vars []string
			for _, e := range c.Env {
				vars = append(vars, e.Name)
			}
			checkProctorEnv(t, p.name+"/"+c.Name, vars)
			switch {
			case c.Name == "server":
				if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil {
					t.Errorf("%s: the server's probes: %+v %+v", p.name, c.ReadinessProbe, c.LivenessProbe)
				}
			case c.Name == "worker":
				if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
					t.Errorf("%s: the worker's liveness probe: %+v", p.name, c.LivenessProbe)
				}
				// The pod outlives the worker's drain.
				if g := p.spec.TerminationGracePeriodSeconds; g == nil || *g <= 60 {
					t.Errorf("%s: termination grace %v, want more than the 60 s shutdown timeout", p.name, g)
				}
			}
			gpus := c.Resources.Limits["nvidia.com/gpu"]
			if strings.HasSuffix(p.name, "gpu-h100") {
				if gpus.Value() != 8 || p.spec.NodeSelector["nvidia.com/gpu.product"] == "" || len(p.spec.Tolerations) == 0 ||
					!slices.Contains(c.Args, "--gpus") || !slices.Contains(c.Args, "0,1,2,3,4,5,6,7") {
					t.Errorf("%s: the GPU pool: gpus %v, node selector %v, tolerations %v, args %v", p.name, gpus.Value(), p.spec.NodeSelector, p.spec.Tolerations, c.Args)
				}
			} else if !gpus.IsZero() {
				t.Errorf("%s asks for GPUs", p.name)
			}
		}
	}
	if rbac := kinds["Role"] + kinds["RoleBinding"]; (podWorkers > 0) != (rbac == 2) {
		t.Errorf("%d workers create pods, and the chart made %d Roles and RoleBindings", podWorkers, rbac)
	}
}
