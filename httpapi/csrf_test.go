package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// cancelCounter is a rollout engine that starts nothing and counts the jobs it is asked to cancel.
type cancelCounter struct {
	launchRecorder
	cancelled atomic.Int64
}

func (c *cancelCounter) CancelJob(context.Context, uuid.UUID) (int, error) {
	c.cancelled.Add(1)
	return 0, nil
}

// browser sends a request as a browser would: with the session cookie (auth "session"), an
// API key (auth "key") or nothing, the headers a page's origin adds, and a body of its type.
func (f *fixture) browser(method, path, auth string, headers map[string]string, contentType string, body []byte) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	switch auth {
	case "session":
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: f.session})
	case "key":
		req.Header.Set("Authorization", "Bearer "+f.key)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return f.send(req)
}

// crossSite are the ways a browser marks a request that a page of another origin made it send.
var crossSite = map[string]map[string]string{
	"an Origin of another site (a browser without Sec-Fetch-Site)": {"Origin": "https://evil.example"},
	"Sec-Fetch-Site: cross-site":                                   {"Sec-Fetch-Site": "cross-site"},
	"Sec-Fetch-Site: same-site (another port of the same host)":    {"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:1"},
	"Origin: null (a sandboxed page or a redirect)":                {"Origin": "null"},
}

// wantCSRFRefusal checks the 403 envelope a forged request gets.
func wantCSRFRefusal(t *testing.T, r response) {
	t.Helper()
	wantEnvelope(t, r, http.StatusForbidden, "forbidden")
	if !strings.Contains(string(r.body), "cross-origin request refused") {
		t.Fatalf("the 403 does not say why: %s", r.body)
	}
}

// Issue 29, item 4: a state-changing request that rides the browser session cookie from another
// origin (a form POST, a fetch without CORS) is refused with the 403 envelope before anything
// changes; the app's own requests (same origin), scripts that send the cookie without an Origin,
// and API keys from anywhere go through, and reads from another origin still work.
func TestCrossSiteRequestsDoNotRideTheSessionCookie(t *testing.T) {
	s := storetest.Open(t, models.SQLite)
	bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	engine := &cancelCounter{}
	f := newFixture(t, s, Options{Bucket: bucket, Blob: bucket.Handler(), Workflows: engine,
		Uploads: UploadLimits{MaxBytes: 1 << 10, AllowedTypes: []string{"text/*"}}})

	// A job with one attempt, an environment with two builds (the first latest), a reserved data
	// file whose bytes are uploaded, and a taskset to attach files to.
	up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"csrf","tasks":[{"name":"a","prompt":"p"}]}`)))
	oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
	if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
		t.Fatal(err)
	}
	traceID := uuid.New()
	job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "target", TasksetID: &up.TasksetID, MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1,
		Traces: []rollouts.LaunchTrace{{TraceID: traceID, TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	jid := "/v2/jobs/" + job.ID.String()
	env, err := registry.Of(s).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "todo"})
	if err != nil {
		t.Fatal(err)
	}
	var builds [2]uuid.UUID
	for i := range builds {
		b, err := registry.Of(s).CreateBuild(ctx, env.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: i == 0, SourceKey: "sources/todo.tar.gz"})
		if err != nil {
			t.Fatal(err)
		}
		builds[i] = b.ID
	}
	reserved := decode[struct {
		File      DataFile `json:"file"`
		UploadURL string   `json:"upload_url"`
	}](t, f.do("POST", "/v2/data", "key", strings.NewReader(`{"name":"notes.txt","size_bytes":5}`)))
	if code := f.putBytes(reserved.UploadURL, []byte("hello")); code/100 != 2 {
		t.Fatalf("PUT the data file's bytes = %d", code)
	}
	form := func() (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		w, _ := mw.CreateFormFile("file", "planted.txt")
		w.Write([]byte("planted")) //nolint:errcheck
		mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}

	get := func(path string, v any) {
		t.Helper()
		r := f.do("GET", path, "key", nil)
		if err := json.Unmarshal(r.body, v); err != nil || r.status != 200 {
			t.Fatalf("GET %s = %d %s", path, r.status, r.body)
		}
	}
	uploads := func() int64 {
		n, err := s.DB.NewSelect().Table("uploads").Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	writes := []struct {
		name         string
		method, path string
		body         func() (contentType string, body []byte)
		changed      func() bool
	}{
		{"publish a job", "POST", jid + "/publish", nil,
			func() bool { var j Job; get(jid, &j); return j.Published }},
		{"invalidate a job", "POST", jid + "/invalidate", nil,
			func() bool { var tr Trace; get("/v2/trace/"+traceID.String(), &tr); return !tr.IsValid }},
		{"rename a job", "PATCH", jid, func() (string, []byte) { return "application/json", []byte(`{"name":"renamed"}`) },
			func() bool { var j Job; get(jid, &j); return j.Name == "renamed" }},
		{"cancel the caller's jobs", "POST", "/v2/rollouts/cancel_user_jobs", nil,
			func() bool { return engine.cancelled.Load() > 0 }},
		{"set the latest build", "POST", "/v2/builds/" + builds[1].String() + "/set-latest", nil,
			func() bool {
				var reg Registry
				get("/v2/registry/"+env.ID.String(), &reg)
				return reg.LatestBuildID != nil && *reg.LatestBuildID == builds[1]
			}},
		{"complete a data file", "POST", "/v2/data/" + reserved.File.ID.String() + "/complete", nil,
			func() bool {
				var d DataFile
				get("/v2/data/"+reserved.File.ID.String(), &d)
				return d.Status == "ready"
			}},
		{"upload a file with the page form (multipart)", "POST", "/v2/uploads?taskset_id=" + up.TasksetID.String(), form,
			func() bool { return uploads() > 0 }},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			send := func(auth string, headers map[string]string) response {
				contentType, body := "", []byte(nil)
				if w.body != nil {
					contentType, body = w.body()
				}
				return f.browser(w.method, w.path, auth, headers, contentType, body)
			}
			for how, headers := range crossSite {
				r := send("session", headers)
				if r.status != http.StatusForbidden {
					t.Errorf("%s with the session cookie = %d, want 403: %s", how, r.status, r.body)
					continue
				}
				wantCSRFRefusal(t, r)
			}
			if w.changed() {
				t.Fatalf("a refused cross-site request changed what it targeted")
			}
			// The web app's own request: same origin, with the cookie.
			if r := send("session", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": f.srv.URL}); r.status/100 != 2 {
				t.Fatalf("the same request from the server's own origin = %d %s", r.status, r.body)
			}
			if !w.changed() {
				t.Errorf("the same-origin request answered 2xx but changed nothing")
			}
		})
	}

	// Other senders that pass: a browser without Sec-Fetch-Site whose Origin is this server, a
	// script that sends the cookie and no Origin, an API key whatever the headers say.
	for _, tc := range []struct {
		who     string
		auth    string
		headers map[string]string
	}{
		{"a browser without Sec-Fetch-Site, from this origin", "session", map[string]string{"Origin": f.srv.URL}},
		{"a script with the cookie and no Origin", "session", nil},
		{"an API key sent cross-site", "key", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}},
		{"an API key beside a cookie, cross-site", "key", map[string]string{"Sec-Fetch-Site": "cross-site", "Cookie": SessionCookie + "=" + f.session}},
	} {
		before := engine.cancelled.Load()
		if r := f.browser("POST", "/v2/rollouts/cancel_user_jobs", tc.auth, tc.headers, "", nil); r.status != 200 || engine.cancelled.Load() == before {
			t.Errorf("cancel_user_jobs by %s = %d %s, want 200 and a cancel", tc.who, r.status, r.body)
		}
		if r := f.browser("POST", "/v2/builds/"+builds[0].String()+"/set-latest", tc.auth, tc.headers, "", nil); r.status != 200 {
			t.Errorf("set-latest by %s = %d %s, want 200", tc.who, r.status, r.body)
		}
	}

	// Reads are not state changes: another origin may still GET with the cookie (what it can
	// read of the answer is CORS's business, and /v2 grants none).
	for how, headers := range crossSite {
		if r := f.browser("GET", jid, "session", headers, "", nil); r.status != 200 {
			t.Errorf("GET a job with %s = %d %s, want 200", how, r.status, r.body)
		}
	}

	// Another origin can neither sign the browser out nor in.
	wantCSRFRefusal(t, f.browser("DELETE", "/auth/session", "session", crossSite["Sec-Fetch-Site: cross-site"], "", nil))
	if r := f.do("GET", jid, "session", nil); r.status != 200 {
		t.Errorf("the session after a cross-site sign-out = %d, want it still signed in", r.status)
	}
	login := []byte(`{"api_key":"` + f.key + `"}`)
	if r := f.browser("POST", "/auth/session", "", crossSite["Sec-Fetch-Site: cross-site"], "application/json", login); r.status != 403 {
		t.Errorf("sign-in with Sec-Fetch-Site: cross-site = %d, want 403", r.status)
	}
}

// The check trusts what the browser says about the request's origin, not the configured public
// URL alone: `proctor dev` advertises http://127.0.0.1:8080, and the app opened as
// http://localhost:8080 signs in and writes. The public URL is trusted too, for an old browser
// behind a proxy that rewrites Host.
func TestSameOriginByAnyAddressOfTheServer(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{PublicURL: "http://127.0.0.1:8080", Workflows: &cancelCounter{}})
	login := []byte(`{"api_key":"` + f.key + `"}`)
	for _, tc := range []struct {
		how     string
		headers map[string]string
		want    int
	}{
		{"the app at localhost", map[string]string{"Host": "localhost:8080", "Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-origin"}, 200},
		{"an old browser at localhost", map[string]string{"Host": "localhost:8080", "Origin": "http://localhost:8080"}, 200},
		{"an old browser through a proxy that rewrites Host", map[string]string{"Host": "proctor-api:8080", "Origin": "http://127.0.0.1:8080"}, 200},
		{"a page on another port", map[string]string{"Host": "localhost:8080", "Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, 403},
		{"an old browser's page on another port", map[string]string{"Host": "localhost:8080", "Origin": "http://localhost:3000"}, 403},
	} {
		if r := f.browser("POST", "/auth/session", "", tc.headers, "application/json", login); r.status != tc.want {
			t.Errorf("sign-in from %s = %d %s, want %d", tc.how, r.status, r.body, tc.want)
		}
		if r := f.browser("POST", "/v2/rollouts/cancel_user_jobs", "session", tc.headers, "", nil); r.status != tc.want {
			t.Errorf("cancel_user_jobs from %s = %d %s, want %d", tc.how, r.status, r.body, tc.want)
		}
	}
}
