package testenv

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
)

// The stand-in internet answers from a namespace of its own, reached from this host's.
func TestTheStandInInternetAnswers(t *testing.T) {
	addr, _ := Internet(t)
	wantGreeting(t, addr)
}

// A run killed before its cleanup leaves its link on the host, routing the slot's addresses to a
// namespace nobody serves; the next stand-in on that slot sweeps it and answers.
func TestTheStandInInternetSweepsWhatADeadRunLeft(t *testing.T) {
	if os.Geteuid() != 0 {
		Unavailable(t, "the stand-in internet makes a network namespace, which needs root")
	}
	n, lock, err := claimInternetSlot()
	if err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("pstale%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "link", "add", stale, "type", "veth", "peer", "name", stale+"p").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "delete", stale).Run() }) //nolint:errcheck // swept already, if all went well
	for _, args := range [][]string{{"addr", "add", fmt.Sprintf("203.0.113.%d/30", 4*n+1), "dev", stale}, {"link", "set", stale, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	lock.Close() // the dead run's lock goes with it

	addr, _ := Internet(t)
	wantGreeting(t, addr)
}

// wantGreeting fails t unless the stand-in at addr answers its greeting.
func wantGreeting(t *testing.T, addr string) {
	t.Helper()
	res, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); string(b) != InternetGreeting {
		t.Errorf("the stand-in answered %q", b)
	}
}
