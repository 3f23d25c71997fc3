package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// uploadTaskLimit is the most tasks an upload may hold, as the document states it (50,000).
func uploadTaskLimit(t *testing.T, api *Server) int {
	t.Helper()
	s := api.OpenAPI().Components.Schemas.Map()["UploadBody"]
	if s == nil || s.Properties["tasks"] == nil || s.Properties["tasks"].MaxItems == nil {
		t.Fatal("the document states no limit on the tasks of an upload")
	}
	return *s.Properties["tasks"].MaxItems
}

// uploadAtTheLimits is an upload of as many tasks as one may hold, filling most of the body
// limit (10 MiB by default), so that the JSON the server decodes and the rows the store writes
// are as many as an upload may bring.
func uploadAtTheLimits(t *testing.T, api *Server) (body []byte, tasks int) {
	t.Helper()
	tasks = uploadTaskLimit(t, api)
	var b bytes.Buffer
	b.WriteString(`{"taskset_name": "at-the-limits", "tasks": [`)
	for i := range tasks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name": "task-%05d", "external_id": "ext-%05d", "prompt": "Add item %d to the list, then check that the list holds it and nothing else.", "description": "generated"}`, i, i, i)
	}
	b.WriteString(`]}`)
	if limit := int(api.maxBodyBytes); b.Len() > limit || b.Len() < limit*3/4 {
		t.Fatalf("the upload is %d bytes; want within the limit of %d and close to it", b.Len(), limit)
	}
	return b.Bytes(), tasks
}

// An upload within the documented limits is stored, however long the store takes: it answered
// 500 after 5 s (context canceled) when the body's read deadline outlived the body, and every
// later request on the same keep-alive connection failed at once. The client waits as long as
// the server takes (no deadline of its own).
func TestUploadAtTheLimitsIsStored(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	body, n := uploadAtTheLimits(t, f.api)
	start := time.Now()
	r := f.do("POST", "/v2/tasks/upload", "key", bytes.NewReader(body))
	if r.status != http.StatusCreated {
		t.Fatalf("upload of %d tasks in %d bytes = %d after %s, want 201: %.300s", n, len(body), r.status, time.Since(start).Round(time.Millisecond), r.body)
	}
	t.Logf("%d tasks, %d bytes: stored in %s", n, len(body), time.Since(start).Round(time.Millisecond))
	res := decode[UploadResult](t, r)
	if res.TaskCount != n || res.TasksCreated != n || len(res.TaskVersionIDs) != n {
		t.Errorf("upload result: %d tasks, %d created, %d version ids; want %d of each", res.TaskCount, res.TasksCreated, len(res.TaskVersionIDs), n)
	}
	if r := f.do("GET", "/v2/tasksets", "key", nil); r.status != http.StatusOK {
		t.Errorf("the next request on the upload's connection = %d, want 200: %s", r.status, r.body)
	}
}

// Huma bounds the reading of a request body with a read deadline on the connection (5 s); left
// in force after the body, it cancels the handler's context when it passes, however long the
// handler has still to go. So no read deadline may be left when the answer is written, whether
// the body was read ahead of Huma (JSON, scanned for control characters: the case that failed)
// or by Huma itself (no Content-Type). This holds the cause on any machine, fast or slow, where
// TestUploadAtTheLimitsIsStored fails only where the store takes over 5 s.
func TestReadDeadlineEndsWithTheBody(t *testing.T) {
	bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{Bucket: bucket})
	conns := make(chan *deadlineConn, 4)
	srv := httptest.NewUnstartedServer(f.api.Handler())
	srv.Listener = deadlineListener{srv.Listener, conns}
	srv.Start()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for _, contentType := range []string{"application/json", ""} {
		req, _ := http.NewRequest("POST", srv.URL+"/v2/tasks/upload", strings.NewReader(`{"taskset_name": "small", "tasks": [{"name": "a", "prompt": "p"}]}`))
		req.Header.Set("Authorization", "Bearer "+f.key)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("upload with Content-Type %q = %d, want 201", contentType, res.StatusCode)
		}
		if d := (<-conns).readDeadlineAtWrite(); !d.IsZero() {
			t.Errorf("Content-Type %q: a read deadline (%s from the answer) was in force while the answer was written, want none once the body is read",
				contentType, time.Until(d).Round(time.Millisecond))
		}
	}
	// A form streams (bodygate.go): its deadline too ends with its body, before the file is stored.
	ts, err := catalog.Of(f.store).CreateTaskset(ctx, f.caller, "forms", "", false)
	if err != nil {
		t.Fatal(err)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "notes.txt")
	fw.Write([]byte("milk\n"))
	mw.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v2/uploads?taskset_id="+ts.ID.String(), &form)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: f.session})
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("a form upload = %d, want 200", res.StatusCode)
	}
	if d := (<-conns).readDeadlineAtWrite(); !d.IsZero() {
		t.Errorf("a form upload: a read deadline (%s from the answer) was in force while the answer was written", time.Until(d).Round(time.Millisecond))
	}
}

// deadlineListener hands each connection it accepts to a test, which can then see the read
// deadline in force when the server began to write.
type deadlineListener struct {
	net.Listener
	conns chan<- *deadlineConn
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	dc := &deadlineConn{Conn: c}
	select {
	case l.conns <- dc:
	default: // a connection the test did not ask for
	}
	return dc, nil
}

type deadlineConn struct {
	net.Conn
	mu      sync.Mutex
	read    time.Time
	wrote   bool
	atWrite time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if !c.wrote {
		c.wrote, c.atWrite = true, c.read
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// readDeadlineAtWrite is the read deadline that was set when the server first wrote.
func (c *deadlineConn) readDeadlineAtWrite() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.atWrite
}

// Keywords and metadata (a Proctor extension of upload and export) come back in the listing and
// the export, the export uploads back as no change, and the listing filters by search (name,
// description, keywords) and keyword, with a total that counts what matched; bad ones are 422s at
// their places, never 500s.
func TestTaskKeywordsAreListedSearchedAndExported(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		body := `{"taskset_name": "tb", "tasks": [
			{"name": "hello-world", "prompt": "p", "description": "Create a file with a greeting",
			 "keywords": ["files", "warm-up"], "metadata": {"harbor": {"source": "terminal-bench", "metadata": {"difficulty": "easy"}}}},
			{"name": "log-census", "prompt": "p", "description": "Count things in logs", "keywords": ["shell", "GREP"]},
			{"name": "plain", "prompt": "p"}
		]}`
		r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(body))
		if r.status != http.StatusCreated {
			t.Fatalf("upload = %d %s", r.status, r.body)
		}
		res := decode[UploadResult](t, r)
		if again := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(body))); again.TasksCreated+again.TasksUpdated != 0 {
			t.Errorf("the same upload again = %+v, want no change", again)
		}

		list := func(query string) Page[TaskSummary] {
			t.Helper()
			r := f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/tasks"+query, "key", nil)
			if r.status != http.StatusOK {
				t.Fatalf("list %s = %d %s", query, r.status, r.body)
			}
			return decode[Page[TaskSummary]](t, r)
		}
		all := list("")
		if len(all.Items) != 3 || strings.Join(all.Items[0].Keywords, ",") != "files,warm-up" || all.Items[2].Keywords == nil || len(all.Items[2].Keywords) != 0 {
			t.Errorf("listed keywords = %+v, want each task's, [] for none", all.Items)
		}
		for _, tc := range []struct {
			query string
			want  string
			total int
		}{
			{"?search=GREETING", "hello-world", 1},        // the description
			{"?search=cens", "log-census", 1},             // the name
			{"?search=gre", "hello-world,log-census", 2},  // a description and a keyword, in part
			{"?keyword=grep", "log-census", 1},            // whole, ignoring case
			{"?keyword=gre", "", 0},                       // not in part
			{"?search=l&keyword=files", "hello-world", 1}, // both
			{"?search=l&limit=1", "hello-world", 3},       // total counts every match, not the page
		} {
			page := list(tc.query)
			var names []string
			for _, it := range page.Items {
				names = append(names, it.Name)
			}
			if strings.Join(names, ",") != tc.want || page.Total != tc.total {
				t.Errorf("%s: %v (total %d), want %s (total %d)", tc.query, names, page.Total, tc.want, tc.total)
			}
		}

		exp := f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/export", "key", nil)
		export := decode[TasksetExport](t, exp)
		if harbor, _ := export.Tasks[0].Metadata["harbor"].(map[string]any); len(export.Tasks) != 3 ||
			strings.Join(export.Tasks[0].Keywords, ",") != "files,warm-up" || harbor["source"] != "terminal-bench" {
			t.Fatalf("export = %s", exp.body)
		}
		// A task without them exports as before they existed.
		var raw struct{ Tasks []map[string]any }
		json.Unmarshal(exp.body, &raw)
		if _, has := raw.Tasks[2]["keywords"]; has || raw.Tasks[2]["metadata"] != nil {
			t.Errorf("a task without keywords or metadata exports them: %v", raw.Tasks[2])
		}
		// The export uploads back into its taskset as no change, and into another as the same.
		for _, into := range []string{`"taskset_id": "` + res.TasksetID.String() + `"`, `"taskset_name": "tb-copy"`} {
			var up map[string]any
			json.Unmarshal(exp.body, &up)
			delete(up, "taskset_id")
			delete(up, "name")
			var where map[string]any
			json.Unmarshal([]byte("{"+into+"}"), &where)
			for k, v := range where {
				up[k] = v
			}
			b, _ := json.Marshal(up)
			r := f.do("POST", "/v2/tasks/upload", "key", bytes.NewReader(b))
			if r.status != http.StatusCreated {
				t.Fatalf("uploading the export (%s) = %d %s", into, r.status, r.body)
			}
			got := decode[UploadResult](t, r)
			if got.TasksetID == res.TasksetID && got.TasksCreated+got.TasksUpdated != 0 {
				t.Errorf("the export uploaded back = %+v, want no change", got)
			}
			if got.TasksetID != res.TasksetID {
				copied := decode[TasksetExport](t, f.do("GET", "/v2/tasksets/"+got.TasksetID.String()+"/export", "key", nil))
				if len(copied.Tasks) != 3 || strings.Join(copied.Tasks[1].Keywords, ",") != "shell,GREP" || copied.Tasks[0].Metadata["harbor"] == nil {
					t.Errorf("the export uploaded as a new taskset = %+v", copied.Tasks)
				}
			}
		}
		// A change of metadata alone is a new version.
		changed := strings.Replace(body, `"difficulty": "easy"`, `"difficulty": "hard"`, 1)
		if upd := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(changed))); upd.TasksUpdated != 1 || upd.TaskVersionIDs[0] == res.TaskVersionIDs[0] {
			t.Errorf("an upload with other metadata = %+v, want a new version of that task", upd)
		}

		tooMany := make([]string, 101)
		for i := range tooMany {
			tooMany[i] = fmt.Sprintf("%q", fmt.Sprint("k", i))
		}
		for _, tc := range []struct{ task, where string }{
			{`{"name": "a", "prompt": "p", "keywords": [` + strings.Join(tooMany, ",") + `]}`, "body.tasks[0].keywords"},
			{`{"name": "a", "prompt": "p", "keywords": ["` + strings.Repeat("k", 101) + `"]}`, "body.tasks[0].keywords[0]"},
			{`{"name": "a", "prompt": "p", "keywords": ["ok", " "]}`, "body.tasks[0].keywords[1]"},
			{`{"name": "a", "prompt": "p", "metadata": ["not", "an", "object"]}`, "body.tasks[0].metadata"},
			{`{"name": "bulky", "prompt": "p", "metadata": {"notes": "` + strings.Repeat("x", 64<<10) + `"}}`, "body.tasks[0].metadata"},
		} {
			r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "bad", "tasks": [`+tc.task+`]}`))
			wantValidation(t, r, tc.where)
			if strings.Contains(tc.task, "bulky") && !strings.Contains(string(r.body), `task \"bulky\"`) {
				t.Errorf("metadata over 64 KiB: %s, want the message to name the task", r.body)
			}
		}
		wantValidation(t, f.do("GET", "/v2/tasksets/"+res.TasksetID.String()+"/tasks?keyword="+strings.Repeat("k", 101), "key", nil), "query.keyword")
	})
}
