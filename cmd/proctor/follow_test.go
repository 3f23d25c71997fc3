package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// follow rides out an API that goes away and comes back (a restarting server) and gives up, with
// the way to re-attach, when it stays away.
func TestFollowRetriesWhileTheAPIRestarts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	var polls atomic.Int64
	serve := func(l net.Listener, body string) *http.Server {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			polls.Add(1)
			io.WriteString(w, body)
		})}
		go srv.Serve(l)
		return srv
	}
	first := serve(l, `{"total_traces":2,"running":1,"completed":1}`)
	c := &apiClient{base: "http://" + addr, key: "k", http: &http.Client{Timeout: 5 * time.Second}}
	var log bytes.Buffer
	done := make(chan jobSummary, 1)
	// The first server answers once the client polls; then it goes away for a second.
	go func() {
		s, err := c.follow(context.Background(), "job-1", &log)
		if err != nil {
			t.Errorf("follow: %v", err)
		}
		done <- s
	}()
	for polls.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	first.Close()
	time.Sleep(time.Second)
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	second := serve(l2, `{"total_traces":2,"completed":2,"avg_reward":1}`)
	defer second.Close()
	select {
	case s := <-done:
		if s.Completed != 2 || !strings.Contains(log.String(), "lost the API") || !strings.Contains(log.String(), "the API is back") ||
			!strings.Contains(log.String(), "proctor jobs watch job-1") {
			t.Errorf("summary %+v; log:\n%s", s, log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("follow did not come back; log:\n%s", log.String())
	}

	// An API that stays away: follow gives up, saying how to re-attach.
	second.Close()
	defer func(d time.Duration) { followRetryFor = d }(followRetryFor)
	followRetryFor = time.Second
	_, err = c.follow(context.Background(), "job-1", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "re-attach with: proctor jobs watch job-1") {
		t.Errorf("follow of a gone API = %v", err)
	}
}
