package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	id, event, data string
}

// sseStream reads a job's stream of finished attempts from base, after the event id last ("" for
// the start, sent as Last-Event-ID), handing each event to f until f says stop or the stream
// ends, or until no event came for testenv.StallWindow (the job stalled: the caller says so).
func sseStream(t *testing.T, base, key, jobID, last string, f func(sseEvent) (stop bool)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stalled := time.AfterFunc(testenv.StallWindow, cancel)
	defer stalled.Stop()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v2/jobs/"+jobID+"/finished", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the stream answered %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" {
				stalled.Reset(testenv.StallWindow) // an event, not a comment: the job moves
				if f(ev) {
					return
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"): // a comment: the stream is alive
		default:
			k, v, _ := strings.Cut(line, ": ")
			switch k {
			case "id":
				ev.id = v
			case "event":
				ev.event = v
			case "data":
				ev.data += v
			}
		}
	}
}

func TestTheStreamOfFinishedAttemptsSurvivesARestart(t *testing.T) {
	eachStore(t, testFinishedStream)
}

// testFinishedStream launches a job of two groups of three attempts (a slow scripted model and
// the oracle), reads its stream of finished attempts until two have ended, restarts the whole
// platform, and reads on from the last event id: every attempt comes once, numbered 1 to 6 in
// order, each group is said complete once, on its last attempt, and an end event closes the
// stream. An id that is none of the stream's is a 422, a job that is not the caller's a 404.
func testFinishedStream(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey}
	srv, _ := scriptedOpenAI(t, twoTodoCalls, 400*time.Millisecond)
	slow := addScriptedModel(t, c, dataDir, storeArgs, "slow", srv.URL)
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	task := c.addTwoTodosTask("stream")
	var launched struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{task}, "model_ids": []string{oracle, slow},
		"group_size": 3, "max_concurrent": 2}, &launched)

	var attempts []FinishedAttemptEventForTest
	var end *sseEvent
	read := func(ev sseEvent) bool {
		switch ev.event {
		case "attempt":
			var a FinishedAttemptEventForTest
			if err := json.Unmarshal([]byte(ev.data), &a); err != nil || strconv.FormatInt(a.Seq, 10) != ev.id {
				t.Errorf("an attempt event %+v: %v", ev, err)
			}
			attempts = append(attempts, a)
		case "end":
			end = &ev
			return true
		default:
			t.Errorf("an event of no known kind: %+v", ev)
		}
		return false
	}
	sseStream(t, c.base, c.key, launched.JobID, "", func(ev sseEvent) bool { return read(ev) || len(attempts) >= 2 })
	if len(attempts) != 2 || end != nil {
		_, traces := c.raw("GET", "/v2/jobs/"+launched.JobID+"/traces?limit=100", nil)
		t.Fatalf("before the restart: %+v, end %v; the job's attempts: %s", attempts, end, traces)
	}
	// A stream left open on a job that runs on (its model never answers) does not hold up the
	// server's graceful stop: it ends, without its end event, and its client would resume.
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "released", http.StatusServiceUnavailable)
	}))
	defer hang.Close()
	defer close(release)
	var running struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{task},
		"model_ids": []string{addScriptedModel(t, c, dataDir, storeArgs, "hang", hang.URL)}}, &running)
	held := make(chan []sseEvent, 1)
	go func() {
		var evs []sseEvent
		sseStream(t, c.base, c.key, running.JobID, "", func(ev sseEvent) bool { evs = append(evs, ev); return false })
		held <- evs
	}()
	time.Sleep(time.Second) // the stream open, past its first page
	took := dev.stop(t)
	if log := dev.errOut.String(); strings.Contains(log, "api server shutdown") {
		t.Errorf("the server's stop waited out its timeout on the open stream (%s):\n%s", took.Round(time.Millisecond), log)
	}
	if evs := <-held; len(evs) > 0 {
		t.Errorf("a stream of a job whose attempts never end gave events: %+v", evs)
	}
	dev = startDev(t, dataDir, storeArgs...)
	c.base, c.key = dev.info.APIURL, dev.info.APIKey
	last := strconv.FormatInt(attempts[len(attempts)-1].Seq, 10)
	// The stream goes on where it was left, however long the job takes: it ends with the job.
	sseStream(t, c.base, c.key, launched.JobID, last, read)
	if end == nil {
		t.Fatalf("the stream stalled after %d attempts without its end event: %s", len(attempts), c.describeLive(launched.JobID))
	}

	var ids []string
	complete := map[string]int{}
	for i, a := range attempts {
		if a.Seq != int64(i+1) || slices.Contains(ids, a.TraceID) {
			t.Errorf("attempt event %d: %+v (seen %v)", i, a, ids)
		}
		ids = append(ids, a.TraceID)
		if a.GroupComplete {
			complete[a.GroupID]++
			for _, later := range attempts[i+1:] {
				if later.GroupID == a.GroupID {
					t.Errorf("group %s said complete before its attempt %s ended", a.GroupID, later.TraceID)
				}
			}
		}
		if a.GroupSize != 3 {
			t.Errorf("attempt %s: group size %d, want 3", a.TraceID, a.GroupSize)
		}
	}
	var traces struct {
		Items []struct{ ID string }
	}
	c.call("GET", "/v2/jobs/"+launched.JobID+"/traces?limit=100", nil, &traces)
	var want []string
	for _, tr := range traces.Items {
		want = append(want, tr.ID)
	}
	slices.Sort(want)
	slices.Sort(ids)
	if !slices.Equal(ids, want) || len(ids) != 6 || len(complete) != 2 || complete[attempts[0].GroupID] != 1 {
		t.Errorf("the stream gave %d attempts %v (the job's: %v) and completed groups %v", len(ids), ids, want, complete)
	}
	if !strings.Contains(end.data, `"attempts":6`) || !strings.Contains(end.data, `"job_status":"completed"`) || !strings.Contains(end.data, `"open":0`) {
		t.Errorf("the end event: %+v", end)
	}
	// Resumed past its last attempt, the stream of an ended job ends at once.
	var after []sseEvent
	sseStream(t, c.base, c.key, launched.JobID, "50", func(ev sseEvent) bool { after = append(after, ev); return ev.event == "end" })
	if len(after) != 1 || after[0].event != "end" {
		t.Errorf("the stream after its last attempt: %+v", after)
	}

	c.call("POST", "/v2/rollouts/cancel_job", map[string]any{"job_id": running.JobID}, nil)
	for path, want := range map[string]int{"/v2/jobs/" + launched.JobID + "/finished": 422, "/v2/jobs/00000000-0000-4000-8000-000000000000/finished": 404} {
		req, _ := http.NewRequest("GET", c.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+c.key)
		req.Header.Set("Last-Event-ID", map[int]string{422: "x", 404: "1"}[want])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want || want == 422 && !strings.Contains(string(body), "Last-Event-ID") {
			t.Errorf("GET %s = %d %s, want %d", path, res.StatusCode, body, want)
		}
	}
}

// FinishedAttemptEventForTest is what the test reads of an attempt event.
type FinishedAttemptEventForTest struct {
	Seq           int64  `json:"seq"`
	TraceID       string `json:"trace_id"`
	GroupID       string `json:"group_id"`
	GroupSize     int    `json:"group_size"`
	GroupComplete bool   `json:"group_complete"`
	Status        string `json:"status"`
}
