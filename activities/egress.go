package activities

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"time"

	"github.com/proctorhq/proctor/internal/egress"
	"github.com/proctorhq/proctor/internal/sandbox"
)

// portInside is the port inside a sandbox where the worker serves it, on the loopback of the
// sandbox's own network namespace (any port is free there): a brought agent's endpoints, and
// the egress proxy of a sandbox whose task allows the network.
const portInside = 8417

// insideURL is where a sandbox's processes find what the worker serves inside it: a brought
// agent's endpoints, and the egress proxy.
var insideURL = urlInside(portInside)

// urlInside is where a sandbox's processes find what the worker serves at port inside it.
func urlInside(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// portWithin is portInside for a brought agent inside its environment, whose network namespace
// it may share (a process of a Harbor task's container, an ephemeral container of the pod),
// where the environment's own egress proxy holds portInside (and a pod's relay 8418).
const portWithin = 8419

// egressServer is one sandbox's way out to the network: the proxy, served on the listener inside
// the sandbox (sandbox.Spec.Listen) until close, which also cuts the connections made through it.
type egressServer struct {
	proxy *egress.Proxy
	srv   *http.Server
}

// egressFor makes the egress of a sandbox of r's try, each destination it asks for a line of
// the try's logs in stream, or nil when the task does not allow the network or the worker's
// sandboxes share its network anyway (a process provider without isolation).
func (a *Activities) egressFor(r *runFor, logs *logSink, stream string) (*egressServer, error) {
	if !r.network() || sharesWorkerNetwork(a.Sandboxes) {
		return nil, nil
	}
	p, err := egress.New(egress.Options{Policy: egress.Policy{Hosts: r.trace.RuntimeConfig.AllowedHosts},
		Log: func(line string) { logs.add(sandbox.LogLine{Stream: stream, Line: line, Time: time.Now()}) }})
	if err != nil {
		return nil, envError("the runtime config's allowed hosts: %v", err)
	}
	return &egressServer{proxy: p, srv: &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// what says where the sandbox's network goes, for the worker log.
func (e *egressServer) what(r *runFor) string {
	switch {
	case e == nil && r.network():
		return "the worker's own network (this worker isolates nothing)"
	case e == nil:
		return "no network"
	case len(r.trace.RuntimeConfig.AllowedHosts) > 0:
		return fmt.Sprintf("the network through its egress proxy, to %d allowed hosts", len(r.trace.RuntimeConfig.AllowedHosts))
	}
	return "the network through its egress proxy, to public hosts"
}

// listen asks spec for the listener the proxy is served on, and gives its processes the
// variables that point their clients at it.
func (e *egressServer) listen(spec *sandbox.Spec) {
	spec.Listen = &sandbox.Listen{Port: portInside, Ready: e.serve}
	spec.Env = maps.Clone(spec.Env)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	maps.Copy(spec.Env, egress.Env(insideURL))
}

func (e *egressServer) serve(ln net.Listener) {
	go e.srv.Serve(ln) //nolint:errcheck // ends with close
}

// close stops the listener and cuts what went through it; a nil egress has nothing to close.
func (e *egressServer) close() {
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	e.srv.Shutdown(ctx) //nolint:errcheck // then closed below
	e.srv.Close()       //nolint:errcheck // closed either way
	e.proxy.Close()     //nolint:errcheck // never fails
}

// sharesWorkerNetwork says whether p's sandboxes run on the worker's own network whatever they
// are given: a process provider without isolation (no bubblewrap), which isolates nothing.
func sharesWorkerNetwork(p sandbox.Provider) bool {
	iso, ok := p.(interface{ Isolation() string })
	return ok && iso.Isolation() == sandbox.IsolationNone
}

// noEgressHere explains a start that failed because this worker cannot make the listener a
// sandbox's egress is served on.
func noEgressHere(err error) error {
	return envError("this worker cannot give a sandbox the network without sharing its own (%v): run it as root, "+
		"or give it proctor-relay (--agent-relay), or run the task without the network", err)
}
