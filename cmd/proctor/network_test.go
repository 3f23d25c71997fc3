package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// netProbeSource is an environment whose one tool tries to reach each address it is given, three
// ways: as any program would (an HTTP client that honours the proxy variables), through the proxy
// whatever the address (as a hostile program would use it), and with a bare TCP connection. It
// answers what each try came to.
const netProbeSource = `package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/proctorhq/proctor/envserver"
)

type targets struct {
	Fetch    []string ` + "`json:\"fetch\"`" + `
	ViaProxy []string ` + "`json:\"via_proxy\"`" + `
	Dial     []string ` + "`json:\"dial\"`" + `
}

type outcomes struct {
	Outcomes map[string]string ` + "`json:\"outcomes\"`" + `
}

func get(c *http.Client, u string) string {
	res, err := c.Get(u)
	if err != nil {
		return "failed: " + err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
	return res.Status + ": " + string(b)
}

func main() {
	envserver.Main(func(logger *slog.Logger) (*envserver.Server, error) {
		srv := envserver.New("netprobe", envserver.WithLogger(logger))
		if _, err := envserver.AddTool(srv, "probe", "Try to reach each address", func(ctx context.Context, in targets) (outcomes, error) {
			out := outcomes{Outcomes: map[string]string{}}
			plain := &http.Client{Timeout: 10 * time.Second}
			for _, u := range in.Fetch {
				out.Outcomes["fetch "+u] = get(plain, u)
			}
			proxy, err := url.Parse(os.Getenv("HTTP_PROXY"))
			forced := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return proxy, err }}}
			for _, u := range in.ViaProxy {
				if os.Getenv("HTTP_PROXY") == "" {
					out.Outcomes["via_proxy "+u] = "no proxy"
					continue
				}
				out.Outcomes["via_proxy "+u] = get(forced, u)
			}
			for _, a := range in.Dial {
				c, err := net.DialTimeout("tcp", a, 3*time.Second)
				if err != nil {
					out.Outcomes["dial "+a] = "failed: " + err.Error()
					continue
				}
				c.Close()
				out.Outcomes["dial "+a] = "connected"
			}
			return out, nil
		}); err != nil {
			return nil, err
		}
		evaluate := envserver.NewHub(envserver.EvaluateHub)
		if _, err := envserver.AddTool(evaluate, "done", "Always 1", func(ctx context.Context, _ targets) (envserver.EvaluationResult, error) {
			return envserver.EvaluationResult{Reward: 1, Done: true}, nil
		}); err != nil {
			return nil, err
		}
		if err := srv.Mount(evaluate); err != nil {
			return nil, err
		}
		return srv, envserver.AddScenario(srv, envserver.Scenario[targets]{Name: "probe", Prompt: "Probe the network.",
			Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "done"}})
	})
}
`

// A sandbox whose task allows the network reaches the internet (a stand-in: testenv.Internet)
// through its egress proxy, and nothing of the worker's: not the embedded Temporal, not the
// API's /metrics, not another port of the host (on any of its addresses), not a private address,
// not cloud metadata; a bare connection reaches nothing at all. Under an allowlist the stand-in,
// not named, is refused; without the network there is no proxy and nothing is reached. On the
// process provider (bubblewrap) and the container provider (podman), one store each.
func TestASandboxAllowedTheNetworkReachesOnlyTheInternet(t *testing.T) {
	t.Parallel()
	internet, hostEnd := testenv.Internet(t)
	// Another port of the host, on every address (as a service bound to 0.0.0.0 is).
	other, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	otherSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "the host's own service") })}
	go otherSrv.Serve(other) //nolint:errcheck // ends with Close
	t.Cleanup(func() { otherSrv.Close() })
	otherPort := other.Addr().(*net.TCPAddr).Port
	probe := outOfTreeModule(t, []byte(netProbeSource))

	for _, pr := range []struct{ provider, store string }{{"process", "sqlite"}, {"container", "postgres"}} {
		t.Run(pr.provider, func(t *testing.T) {
			t.Parallel()
			args := []string{"--build-goproxy", "off"}
			if pr.provider == "container" {
				args = append(args, "--sandbox-provider", "container", "--container-host", testenv.ContainerEngine(t),
					"--container-owner", "net-"+filepath.Base(t.TempDir()), "--agent-relay", testenv.StaticProgram(t, "cmd/proctor-relay"))
			}
			if pr.store == "postgres" {
				args = append(args, "--database-url", storetest.PostgresURL(t))
			}
			dev := startDev(t, t.TempDir(), args...)
			c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
			if b := c.waitBuild(c.deploy(tarGz(t, probe), map[string]any{"name": "netprobe"})["id"].(string)); b["status"] != "succeeded" {
				t.Fatalf("the probe's build = %v", b)
			}
			apiURL, _ := url.Parse(dev.info.APIURL)
			temporal := dev.info.TemporalAddress
			_, temporalPort, _ := net.SplitHostPort(temporal)
			stranger := net.JoinHostPort(hostEnd, fmt.Sprint(otherPort))
			targets := map[string]any{
				"fetch": []string{"http://" + internet + "/"},
				"via_proxy": []string{"http://" + internet + "/", "http://" + temporal + "/", "https://" + temporal + "/",
					"http://" + apiURL.Host + "/metrics", "http://" + stranger + "/", "http://" + net.JoinHostPort(hostEnd, temporalPort) + "/",
					"http://10.255.255.1/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:" + temporalPort + "/"},
				"dial": []string{internet, temporal, stranger},
			}
			outcomes := func(name string, runtime map[string]any) map[string]string {
				t.Helper()
				var up struct {
					TaskVersionIDs []string `json:"task_version_ids"`
				}
				c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "net-" + name, "tasks": []any{map[string]any{
					"name": name, "env": "netprobe", "scenario": "probe", "args": targets, "runtime_config": runtime,
					"validation": []any{map[string]any{"name": "probe", "arguments": targets}}}}}, &up)
				tr, logs := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": c.resolve("/v2/models/resolve?model=oracle", "id")})
				if tr.Status != "completed" {
					t.Fatalf("the %s probe = %+v\n%s", name, tr, logs)
				}
				var ev struct{ Events []traceEvent }
				c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &ev)
				out := map[string]string{}
				for _, e := range ev.Events {
					if e.Kind != "tool_result" {
						continue
					}
					st, _ := e.Data["structured"].(map[string]any)
					m, _ := st["outcomes"].(map[string]any)
					for k, v := range m {
						out[k] = fmt.Sprint(v)
					}
				}
				if len(out) == 0 {
					t.Fatalf("the %s probe answered nothing: %v", name, ev.Events)
				}
				t.Logf("%s on %s: %d probes, the environment's log:\n%s", name, pr.provider, len(out), logs)
				return out
			}
			reached := func(s string) bool { return strings.HasPrefix(s, "200 OK: "+testenv.InternetGreeting) }

			open := outcomes("open", map[string]any{"network": true})
			if o := open["fetch http://"+internet+"/"]; !reached(o) {
				t.Errorf("allowed the network, the stand-in internet through the proxy: %q, want its greeting", o)
			}
			if o := open["via_proxy http://"+internet+"/"]; !reached(o) {
				t.Errorf("allowed the network, the stand-in internet via the proxy: %q", o)
			}
			for k, o := range open {
				if strings.HasPrefix(k, "via_proxy ") && !strings.Contains(k, internet) && !(strings.HasPrefix(o, "403 Forbidden: proctor egress:") || strings.Contains(o, "Forbidden")) {
					t.Errorf("allowed the network, %s = %q, want it refused by the egress proxy", k, o)
				}
				if strings.HasPrefix(k, "dial ") && o == "connected" {
					t.Errorf("allowed the network, a bare connection %s connected: only the proxy is a way out", k)
				}
			}
			for _, want := range []string{"the loopback", "a private address", "link-local", "an address of the worker's host"} {
				found := false
				for _, o := range open {
					found = found || strings.Contains(o, want)
				}
				if !found {
					t.Errorf("no refusal said %q: %v", want, open)
				}
			}

			allow := outcomes("allowlist", map[string]any{"network": true, "allowed_hosts": []string{"pypi.org"}})
			if o := allow["fetch http://"+internet+"/"]; !strings.Contains(o, "not among the hosts the task allows") {
				t.Errorf("under an allowlist without it, the stand-in: %q, want refused", o)
			}

			closed := outcomes("closed", map[string]any{"network": false})
			for k, o := range closed {
				if reached(o) || o == "connected" || (strings.HasPrefix(k, "via_proxy ") && o != "no proxy") {
					t.Errorf("without the network, %s = %q, want nothing reached and no proxy", k, o)
				}
			}
		})
	}
}
