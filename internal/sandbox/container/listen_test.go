package container_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// A container whose spec asks for a listener inside finds it at 127.0.0.1:PORT from its first
// instruction, served through the relay by whoever holds the listener; the relay passes the
// command's exit status on; and such a companion takes no slot.
func TestAListenerInsideAContainerIsReachedThroughTheRelay(t *testing.T) {
	host := testenv.ContainerEngine(t)
	relay := testenv.StaticProgram(t, "cmd/proctor-relay")
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := newProvider(t, host, 1, func(o *container.Options) { o.Relay = relay })
	defer p.Close(context.Background())
	sandboxtest.Listening(t, p, im.Of(t, root))

	plain := newProvider(t, host, 1)
	defer plain.Close(context.Background())
	if _, err := plain.Start(t.Context(), sandbox.Spec{ID: "x", Command: []string{"/bin/true"}, Image: im.Of(t, root),
		Listen: &sandbox.Listen{Port: 7777, Ready: func(net.Listener) {}}}); !errors.Is(err, sandbox.ErrNoListen) {
		t.Errorf("a listener inside without a relay: %v, want ErrNoListen", err)
	}
}

// A container can work in another sandbox's work dir: what it writes there stays, for the
// other, once it is stopped.
func TestAContainerWorksInAnothersWorkDirAndLeavesIt(t *testing.T) {
	host := testenv.ContainerEngine(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := newProvider(t, host, 2)
	defer p.Close(context.Background())
	first, err := p.Start(t.Context(), sandbox.Spec{ID: "first", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop(context.Background())
	second, err := p.Start(t.Context(), sandbox.Spec{ID: "second", Command: []string{"/bin/sh", "-c", `echo "from $PWD" > shared.txt`},
		Image: im.Of(t, root), WorkDir: first.WorkDir(), Companion: true})
	if err != nil {
		t.Fatal(err)
	}
	second.Stdin().Close()
	<-second.Done()
	if err := second.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(first.WorkDir(), "shared.txt"))
	if err != nil || string(b) != "from "+sandbox.WorkDirInImage+"\n" {
		t.Errorf("the first container's work dir holds %q (%v) once the second stopped; want the file it wrote there", b, err)
	}
}

// A relay that would not run in any image (linked dynamically) is refused when the provider
// starts, saying why.
func TestADynamicallyLinkedRelayIsRefused(t *testing.T) {
	host := testenv.ContainerEngine(t)
	_, err := container.New(t.Context(), container.Options{Host: host, Root: t.TempDir(), Owner: "test-" + t.Name(), Relay: "/bin/sh"})
	if err == nil || !strings.Contains(err.Error(), "linked dynamically") {
		t.Errorf("New with /bin/sh as the relay: %v, want a refusal saying it is linked dynamically", err)
	}
}

// A brought agent inside its environment runs from the environment's image, its own image bound
// in read-only and its program run by that image's own loader (sandboxtest.Inside).
func TestAContainerIsShownAnotherImageAndRunsItsProgram(t *testing.T) {
	host := testenv.ContainerEngine(t)
	relay := testenv.StaticProgram(t, "cmd/proctor-relay")
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := newProvider(t, host, 1, func(o *container.Options) { o.Relay = relay })
	defer p.Close(context.Background())
	env, err := p.Start(t.Context(), sandbox.Spec{ID: "env", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop(context.Background())
	sandboxtest.Inside(t, p, env, sandbox.Spec{Image: im.Of(t, root)})
}

// A sandbox within a container whose root is writable (a brought agent inside a Harbor task) is
// a process of that very container: it runs another image's program shown in it
// (sandboxtest.Inside), from the working directory it names, sees and makes changes to the
// container's root, and its Stop ends it (its command stopped through the relay's lifeline)
// while the container runs on.
func TestASandboxWithinAWritableRootContainerRunsInIt(t *testing.T) {
	host := testenv.ContainerEngine(t)
	relay := testenv.StaticProgram(t, "cmd/proctor-relay")
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := newProvider(t, host, 1, func(o *container.Options) { o.Relay = relay })
	defer p.Close(context.Background())
	env, err := p.Start(t.Context(), sandbox.Spec{ID: "env", Command: []string{"/bin/sh", "-c", "echo env > /app/from-env; exec sleep 300"}, Image: im.Of(t, root), WritableRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop(context.Background())
	sandboxtest.Inside(t, p, env, sandbox.Spec{Image: im.Of(t, root)})

	spec := sandbox.Spec{ID: "shares", Image: im.Of(t, root), Within: env, WorkDir: env.WorkDir(), Companion: true, Dir: "/app",
		Command: []string{"/bin/sh", "-c", `until [ -f from-env ]; do sleep 0.1; done; echo "$PWD $(cat from-env) $(ls -ld /tmp)"; echo agent > /app/from-agent`}}
	out, err := sandboxtest.RunListening(t, p, spec, 7777)
	// /tmp keeps its mode (the image's, 0777) when another image's files are copied under it.
	if !strings.HasPrefix(out, "/app env drwxrwxrwx") || err == nil || !strings.Contains(err.Error(), "exit status 0") {
		t.Errorf("within the container: %q, %v; want its working directory, the container's file and /tmp as the image made it, exit status 0", out, err)
	}
	spec.ID, spec.Command = "reads", []string{"/bin/cat", "/app/from-agent"}
	if out, _ := sandboxtest.RunListening(t, p, spec, 7777); out != "agent\n" {
		t.Errorf("a second sandbox within reads %q, want what the first wrote to the container's root", out)
	}

	// Stopped while it runs: its command ends through the relay's lifeline, with what it left
	// running in the background; the container lives on.
	spec.ID, spec.Command = "long", []string{"/bin/sh", "-c", "sleep 311 & sleep 312"}
	spec.Listen = &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) { go func() { <-t.Context().Done(); ln.Close() }() }}
	long, err := p.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := long.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took := time.Since(begin); !errors.Is(long.Err(), sandbox.ErrStopped) || took > 15*time.Second {
		t.Errorf("the stopped sandbox within: %v after %s", long.Err(), took)
	}
	select {
	case <-env.Done():
		t.Errorf("the container ended with the sandbox within: %v", env.Err())
	default:
	}
	// The container's processes, as another sandbox within it reads them.
	spec.ID, spec.Listen = "ps", nil
	spec.Command = []string{"/bin/sh", "-c", `for f in /proc/[0-9]*/cmdline; do cat $f; echo; done`}
	if out, _ := sandboxtest.RunListening(t, p, spec, 7777); !strings.Contains(out, "sleep\x00300") || strings.Contains(out, "sleep\x00311") || strings.Contains(out, "sleep\x00312") {
		t.Errorf("the container's processes after Stop (the long sandbox's must be gone, the container's own there):\n%q", out)
	}
	// Without the relay no sandbox runs within a container.
	plain := newProvider(t, host, 1, func(o *container.Options) { o.Owner += "-plain" })
	defer plain.Close(context.Background())
	bare, err := plain.Start(t.Context(), sandbox.Spec{ID: "bare", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root), WritableRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Stop(context.Background())
	spec.ID, spec.Within, spec.WorkDir = "refused", bare, bare.WorkDir()
	if _, err := plain.Start(t.Context(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "made without the relay") {
		t.Errorf("within a container made without the relay: %v, want ErrInvalidSpec saying so", err)
	}
	spec.Listen = &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) { ln.Close() }}
	if _, err := plain.Start(t.Context(), spec); !errors.Is(err, sandbox.ErrNoListen) {
		t.Errorf("a listener within, from a provider without the relay: %v, want ErrNoListen", err)
	}
}
