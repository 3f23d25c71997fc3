package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/proctorhq/proctor/internal/apitest"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// TestMain checks every response of the suite against openapi.yaml (see internal/apitest).
func TestMain(m *testing.M) { storetest.Main(m, apitest.Install()) }

var ctx = context.Background()

// fixture is an API server on a real store with one team whose member holds a key and a session.
type fixture struct {
	t       testing.TB
	store   *models.Store
	api     *Server
	srv     *httptest.Server
	caller  *models.Caller
	key     string
	session string
}

func newFixture(t testing.TB, store *models.Store, opts Options) *fixture {
	t.Helper()
	b, err := store.BootstrapIfEmpty(ctx, "alpha", "Ada", "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	_, sessionToken, err := store.CreateSession(ctx, b.Membership.ID, nil, 3600e9)
	if err != nil {
		t.Fatal(err)
	}
	opts.Store = store
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	api := New(opts)
	f := &fixture{
		t: t, store: store, api: api, key: b.Token, session: sessionToken,
		caller: &models.Caller{TeamID: b.Team.ID, UserID: b.User.ID, MembershipID: b.Membership.ID},
	}
	f.srv = httptest.NewServer(api.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

// do sends a request; auth is "", "key", "session", or a raw Authorization header value.
func (f *fixture) do(method, path, auth string, body io.Reader) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	switch auth {
	case "":
	case "key":
		req.Header.Set("Authorization", "Bearer "+f.key)
	case "session":
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: f.session})
	default:
		req.Header.Set("Authorization", auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return f.send(req)
}

// send sends req and reads the whole response.
func (f *fixture) send(req *http.Request) response {
	f.t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// wantEnvelope checks a non-422 error: the status and the envelope with its code.
func wantEnvelope(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var env ErrorBody
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Code != code || env.Error.Message == "" {
		t.Fatalf("body %s is not the envelope with code %q", r.body, code)
	}
}

// wantValidation checks a 422 and that every named location failed.
func wantValidation(t *testing.T, r response, locations ...string) {
	t.Helper()
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422: %s", r.status, r.body)
	}
	var em huma.ErrorModel
	if err := json.Unmarshal(r.body, &em); err != nil {
		t.Fatal(err)
	}
	for _, loc := range locations {
		found := false
		for _, d := range em.Errors {
			found = found || d.Location == loc
		}
		if !found {
			t.Errorf("422 body %s names no error at %s", r.body, loc)
		}
	}
}

func TestListTasksets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})

		r := f.do("GET", "/v2/tasksets", "key", nil)
		if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"items":[],"total":0,"limit":50,"offset":0}` {
			t.Fatalf("empty list = %d %s", r.status, r.body)
		}
		for _, name := range []string{"b-set", "a-set", "c-set"} {
			if _, err := catalog.Of(s).CreateTaskset(ctx, f.caller, name, "d", false); err != nil {
				t.Fatal(err)
			}
		}
		r = f.do("GET", "/v2/tasksets?sort_by=name&limit=2&offset=1", "session", nil)
		var page Page[Taskset]
		if r.status != 200 || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("list = %d %s", r.status, r.body)
		}
		if page.Total != 3 || page.Limit != 2 || page.Offset != 1 || len(page.Items) != 2 || page.Items[0].Name != "b-set" {
			t.Fatalf("page = %+v, want b-set, c-set of 3", page)
		}
		it := page.Items[0]
		if !it.IsOwner || !it.CanEdit || !it.CanManage || it.Columns == nil || it.HiddenProgressStages == nil {
			t.Errorf("row = %+v", it)
		}
		if !strings.Contains(string(r.body), `"hidden_progress_stages":[]`) || !strings.Contains(string(r.body), `"columns":{}`) {
			t.Errorf("empty collections must be [] and {}, got %s", r.body)
		}
		if r := f.do("GET", "/v2/tasksets?search=A-S", "key", nil); !strings.Contains(string(r.body), `"total":1`) {
			t.Errorf("search is not case-insensitive: %s", r.body)
		}

		// Credentials.
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "", nil), 401, "unauthorized")
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "Bearer pk_00000000_nope", nil), 401, "unauthorized")
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "Token "+f.key, nil), 401, "unauthorized")
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "Bearer", nil), 401, "unauthorized")

		// Bounds, types and enums of the query.
		wantValidation(t, f.do("GET", "/v2/tasksets?limit=0", "key", nil), "query.limit")
		wantValidation(t, f.do("GET", "/v2/tasksets?limit=501", "key", nil), "query.limit")
		wantValidation(t, f.do("GET", "/v2/tasksets?limit=ten", "key", nil), "query.limit")
		wantValidation(t, f.do("GET", "/v2/tasksets?offset=-1", "key", nil), "query.offset")
		wantValidation(t, f.do("GET", "/v2/tasksets?offset=2147483648", "key", nil), "query.offset")
		wantValidation(t, f.do("GET", "/v2/tasksets?sort_by=popular&public_only=maybe", "key", nil), "query.sort_by", "query.public_only")
	})
}

func TestBrowserSessionSignInAndOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		wantEnvelope(t, f.do("POST", "/auth/session", "", strings.NewReader(`{"api_key":"pk_00000000_x"}`)), 401, "unauthorized")
		wantEnvelope(t, f.do("POST", "/auth/session", "", strings.NewReader(`not json`)), 400, "bad_request")

		r := f.do("POST", "/auth/session", "", strings.NewReader(fmt.Sprintf(`{"api_key":%q}`, f.key)))
		if r.status != 200 {
			t.Fatalf("sign in = %d %s", r.status, r.body)
		}
		var cookie *http.Cookie
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == SessionCookie {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode {
			t.Fatalf("session cookie = %+v", cookie)
		}
		f.session = cookie.Value
		if r := f.do("GET", "/v2/tasksets", "session", nil); r.status != 200 {
			t.Fatalf("list with the new session = %d %s", r.status, r.body)
		}
		if r := f.do("DELETE", "/auth/session", "session", nil); r.status != 204 {
			t.Fatalf("sign out = %d %s", r.status, r.body)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "session", nil), 401, "unauthorized")

		// A session signed in with a key ends when the key is revoked.
		r = f.do("POST", "/auth/session", "", strings.NewReader(fmt.Sprintf(`{"api_key":%q}`, f.key)))
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == SessionCookie {
				f.session = c.Value
			}
		}
		if r := f.do("GET", "/v2/tasksets", "session", nil); r.status != 200 {
			t.Fatalf("list with the second session = %d %s", r.status, r.body)
		}
		kc, err := s.AuthenticateAPIKey(ctx, f.key)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeAPIKey(ctx, kc.TeamID, kc.APIKeyID); err != nil {
			t.Fatal(err)
		}
		wantEnvelope(t, f.do("GET", "/v2/tasksets", "session", nil), 401, "unauthorized")
	})
}

type probeOutput struct {
	Body struct {
		Team string `json:"team"`
		Kind string `json:"kind"`
	}
}

type probeInput struct {
	Body struct {
		Name string `json:"name" maxLength:"10"`
	}
}

// TestAuthModes registers one probe operation per mode and checks who gets through.
func TestAuthModes(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	for _, mode := range []authMode{authKeyOrSession, authAPIKey, authSession, authOptional, authNone} {
		huma.Register(f.api.v2, op(huma.Operation{OperationID: "probe-" + string(mode), Method: "GET", Path: "/probe/" + string(mode)}, mode),
			func(ctx context.Context, _ *struct{}) (*probeOutput, error) {
				out := &probeOutput{}
				if c := callerFrom(ctx); c != nil {
					out.Body.Team, out.Body.Kind = c.TeamID.String(), string(c.Kind)
				}
				return out, nil
			})
	}
	const pass, deny = 200, 401
	for _, tc := range []struct {
		mode                      authMode
		anonymous, key, session   int
		wantCallerWithCredentials bool
	}{
		{authKeyOrSession, deny, pass, pass, true},
		{authAPIKey, deny, pass, deny, true},
		{authSession, deny, deny, pass, true},
		{authOptional, pass, pass, pass, true},
		{authNone, pass, pass, pass, false},
	} {
		for auth, want := range map[string]int{"": tc.anonymous, "key": tc.key, "session": tc.session} {
			r := f.do("GET", "/v2/probe/"+string(tc.mode), auth, nil)
			if r.status != want {
				t.Errorf("%s with %q credentials: %d, want %d: %s", tc.mode, auth, r.status, want, r.body)
				continue
			}
			if want == deny {
				wantEnvelope(t, r, deny, "unauthorized")
			} else if auth != "" && tc.wantCallerWithCredentials && !strings.Contains(string(r.body), f.caller.TeamID.String()) {
				t.Errorf("%s with %q credentials: the handler saw no caller: %s", tc.mode, auth, r.body)
			}
		}
	}
	// Invalid credentials are refused even where none are needed.
	wantEnvelope(t, f.do("GET", "/v2/probe/optional", "Bearer pk_00000000_bad", nil), 401, "unauthorized")
}

func TestErrorsUseTheEnvelope(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	huma.Register(f.api.v2, op(huma.Operation{OperationID: "probe-panic", Method: "GET", Path: "/probe/panic"}, authNone),
		func(ctx context.Context, _ *struct{}) (*probeOutput, error) { panic("boom") })
	huma.Register(f.api.v2, op(huma.Operation{OperationID: "probe-body", Method: "POST", Path: "/probe/body", MaxBodyBytes: 64}, authNone),
		func(ctx context.Context, in *probeInput) (*probeOutput, error) { return &probeOutput{}, nil })
	huma.Register(f.api.v2, op(huma.Operation{OperationID: "probe-missing", Method: "GET", Path: "/probe/missing"}, authNone),
		func(ctx context.Context, _ *struct{}) (*probeOutput, error) {
			return nil, storeError(fmt.Errorf("get thing: %w", models.ErrNotFound), "thing")
		})

	// An unexpected error is a 500 that names the request and keeps its cause in the log.
	var logged testenv.Buffer
	f500 := newFixture(t, storetest.Open(t, models.SQLite), Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	huma.Register(f500.api.v2, op(huma.Operation{OperationID: "probe-fail", Method: "GET", Path: "/probe/fail"}, authNone),
		func(ctx context.Context, _ *struct{}) (*probeOutput, error) {
			return nil, fmt.Errorf("list things: SQL logic error: unrecognized token: \"secret\"")
		})
	r500 := f500.do("GET", "/v2/probe/fail", "", nil)
	wantEnvelope(t, r500, 500, "internal")
	id := r500.header.Get("X-Request-Id")
	if strings.Contains(string(r500.body), "SQL") || !strings.Contains(string(r500.body), id) {
		t.Errorf("500 body = %s: want the request id %s and no internal text", r500.body, id)
	}
	if !strings.Contains(logged.String(), "unrecognized token") || !strings.Contains(logged.String(), "request_id="+id) {
		t.Errorf("the log does not hold the cause with the request id:\n%s", logged.String())
	}

	wantEnvelope(t, f.do("GET", "/v2/nothing-here", "key", nil), 404, "not_found")
	wantEnvelope(t, f.do("DELETE", "/v2/tasksets", "key", nil), 405, "method_not_allowed")
	wantEnvelope(t, f.do("GET", "/v2/probe/panic", "", nil), 500, "internal")
	wantEnvelope(t, f.do("GET", "/v2/probe/missing", "", nil), 404, "not_found")
	wantEnvelope(t, f.do("POST", "/v2/probe/body", "", strings.NewReader(`{"name": "`+strings.Repeat("x", 100)+`"}`)), 413, "payload_too_large")
	wantEnvelope(t, f.do("POST", "/v2/probe/body", "", strings.NewReader(`{"name": `)), 400, "bad_request")
	wantValidation(t, f.do("POST", "/v2/probe/body", "", strings.NewReader(`{"name": 12345678901}`)), "body.name")

	r := f.do("GET", "/healthz", "", nil)
	if r.status != 200 || len(r.header.Get("X-Request-Id")) != 24 {
		t.Errorf("healthz = %d, request id %q", r.status, r.header.Get("X-Request-Id"))
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/healthz", nil)
	req.Header.Set("X-Request-Id", "trace-abc-123")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Request-Id"); got != "trace-abc-123" {
		t.Errorf("request id not echoed: %q", got)
	}
}

type checkFunc func(context.Context) error

func (f checkFunc) CheckHealth(ctx context.Context) error { return f(ctx) }

func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		temporal HealthChecker
		status   int
		body     string
	}{
		{"every dependency answers", checkFunc(func(context.Context) error { return nil }), 200, `"status":"ready"`},
		{"temporal down", checkFunc(func(context.Context) error { return errors.New("connection refused") }), 503, `"temporal":"connection refused"`},
		{"temporal not configured", nil, 503, `"temporal":"not configured"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, storetest.Open(t, models.SQLite), Options{Temporal: tc.temporal})
			r := f.do("GET", "/readyz", "", nil)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.body) || !strings.Contains(string(r.body), `"database":"ok"`) {
				t.Errorf("readyz = %d %s, want %d with %s", r.status, r.body, tc.status, tc.body)
			}
		})
	}
}

// Metrics name every team's models and spend: the API listener serves them only with the metrics
// token, and never to a team's key or session.
func TestMetricsNeedTheMetricsToken(t *testing.T) {
	off := newFixture(t, storetest.Open(t, models.SQLite), Options{Metrics: metrics.New()})
	wantEnvelope(t, off.do("GET", "/metrics", "", nil), http.StatusNotFound, "not_found")
	wantEnvelope(t, off.do("GET", "/metrics", "key", nil), http.StatusNotFound, "not_found")

	on := newFixture(t, storetest.Open(t, models.SQLite), Options{Metrics: metrics.New(), MetricsToken: "scrape-token-5a1f"})
	for _, auth := range []string{"", "key", "session", "Bearer scrape-token-5a1e", "Basic c2NyYXBlOnRva2Vu"} {
		r := on.do("GET", "/metrics", auth, nil)
		wantEnvelope(t, r, http.StatusUnauthorized, "unauthorized")
		if strings.Contains(string(r.body), "go_goroutines") {
			t.Errorf("/metrics with %q answered metrics", auth)
		}
	}
	if r := on.do("GET", "/metrics", "Bearer scrape-token-5a1f", nil); r.status != 200 || !strings.Contains(string(r.body), "go_goroutines") {
		t.Errorf("/metrics with the token = %d %.200s", r.status, r.body)
	}
}

// An unmigrated or newer schema makes the server unready, saying which.
func TestReadyzChecksTheSchema(t *testing.T) {
	store := storetest.Open(t, models.SQLite)
	f := newFixture(t, store, Options{Temporal: checkFunc(func(context.Context) error { return nil })})
	if r := f.do("GET", "/readyz", "", nil); r.status != 200 || !strings.Contains(string(r.body), `"schema":"ok"`) {
		t.Fatalf("readyz on the current schema = %d %s", r.status, r.body)
	}
	var last string
	if err := store.DB.NewSelect().Table("bun_migrations").Column("name").OrderExpr("name DESC").Limit(1).Scan(ctx, &last); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DB.NewDelete().Table("bun_migrations").Where("name = ?", last).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if r := f.do("GET", "/readyz", "", nil); r.status != 503 || !strings.Contains(string(r.body), "lacks 1 migrations of this binary (from "+last+"): run `proctor migrate`") {
		t.Errorf("readyz with a migration pending = %d %s", r.status, r.body)
	}
	for _, name := range []string{last, "29990101000001_from_the_future"} {
		if _, err := store.DB.ExecContext(ctx, "INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES (?, ?, ?)", name, 99, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
	}
	if r := f.do("GET", "/readyz", "", nil); r.status != 503 || !strings.Contains(string(r.body), "migrated by a newer Proctor") {
		t.Errorf("readyz with a newer schema = %d %s", r.status, r.body)
	}
}

func TestOpenAPIDocument(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	r := f.do("GET", "/openapi.json", "", nil)
	if r.status != 200 {
		t.Fatalf("openapi.json = %d", r.status)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct{ Version string }
		Paths   map[string]map[string]struct {
			OperationID string                `json:"operationId"`
			Security    []map[string][]string `json:"security"`
			Parameters  []struct {
				Name, In string
				Schema   map[string]any
			}
			Responses map[string]struct {
				Content map[string]struct{ Schema map[string]any }
			}
		}
		Components struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		}
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Version != APIVersion {
		t.Errorf("openapi %q version %q, want 3.1.0 and %s", doc.OpenAPI, doc.Info.Version, APIVersion)
	}
	if doc.Components.SecuritySchemes["bearer"]["scheme"] != "bearer" {
		t.Errorf("bearer scheme = %v", doc.Components.SecuritySchemes["bearer"])
	}
	for path := range doc.Paths {
		if !strings.HasPrefix(path, "/v2/") && path != "/healthz" && path != "/readyz" {
			t.Errorf("public route %s is outside /v2", path)
		}
	}
	list := doc.Paths["/v2/tasksets"]["get"]
	params := map[string]map[string]any{}
	for _, p := range list.Parameters {
		params[p.Name] = p.Schema
	}
	want := map[string]map[string]any{
		"limit":       {"minimum": 1.0, "maximum": 500.0, "default": 50.0, "type": "integer"},
		"offset":      {"minimum": 0.0, "maximum": 2147483647.0, "default": 0.0},
		"sort_by":     {"default": "starred", "enum": []any{"starred", "date", "name", "stars", "tasks"}},
		"public_only": {"default": false, "type": "boolean"},
		"owner_only":  {"default": false},
		"search":      {"type": "string"},
	}
	for name, fields := range want {
		for k, v := range fields {
			if got, _ := json.Marshal(params[name][k]); string(got) != string(must(json.Marshal(v))) {
				t.Errorf("param %s: %s = %s, want %v", name, k, got, v)
			}
		}
	}
	if got := list.Responses["422"].Content["application/problem+json"].Schema["$ref"]; got != "#/components/schemas/ErrorModel" {
		t.Errorf("422 schema = %v, want the validation body", got)
	}
	if got := list.Responses["401"].Content["application/json"].Schema["$ref"]; got != "#/components/schemas/ApiError" {
		t.Errorf("401 schema = %v, want the envelope", got)
	}
	if len(list.Security) != 2 || list.Security[0]["bearer"] == nil {
		t.Errorf("security = %v, want bearer or session", list.Security)
	}
	if r := f.do("GET", "/openapi.yaml", "", nil); r.status != 200 || !bytes.HasPrefix(r.body, []byte("components:")) {
		t.Errorf("openapi.yaml = %d %.40s", r.status, r.body)
	}
}

// TestCommittedOpenAPIIsCurrent fails when a route changed and openapi.yaml was not regenerated.
func TestCommittedOpenAPIIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	generated, err := Spec()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, generated) {
		t.Fatal("openapi.yaml is stale: run `task openapi` (or `go run ./cmd/proctor openapi > openapi.yaml`) and commit it")
	}
}

func TestDocsPage(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Get(f.srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/docs/" {
		t.Errorf("/docs = %d → %q", res.StatusCode, res.Header.Get("Location"))
	}
	r := f.do("GET", "/docs/", "", nil)
	if r.status != 200 || !strings.Contains(string(r.body), `data-spec-url="/openapi.json"`) {
		t.Errorf("/docs/ = %d %.200s", r.status, r.body)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestSignInRefusesCrossSiteRequestsAndResponsesCarrySecurityHeaders(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	login := func(contentType, origin string) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/auth/session", strings.NewReader(fmt.Sprintf(`{"api_key":%q}`, f.key)))
		req.Header.Set("Content-Type", contentType)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := login("text/plain", ""); code != http.StatusUnsupportedMediaType {
		t.Errorf("sign-in as text/plain = %d, want 415", code)
	}
	if code := login("application/x-www-form-urlencoded", ""); code != http.StatusUnsupportedMediaType {
		t.Errorf("sign-in as a form = %d, want 415", code)
	}
	if code := login("application/json", "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("sign-in from another origin = %d, want 403", code)
	}
	if code := login("application/json", f.srv.URL); code != http.StatusOK {
		t.Errorf("sign-in from the server's own origin = %d, want 200", code)
	}
	if code := login("application/json; charset=utf-8", ""); code != http.StatusOK {
		t.Errorf("sign-in without an Origin (a script) = %d, want 200", code)
	}
	for _, path := range []string{"/v2/tasksets", "/v2/nothing", "/healthz"} {
		r := f.do("GET", path, "key", nil)
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "no-referrer" || r.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s headers = %v", path, r.header)
		}
	}
}

func TestFailedAuthenticationIsThrottledPerAddress(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	clock := time.Now()
	f.api.throttle.now = func() time.Time { return clock }
	for i := range authBurst {
		if r := f.do("GET", "/v2/tasksets", "Bearer pk_00000000_wrong", nil); r.status != 401 {
			t.Fatalf("bad key %d = %d, want 401", i, r.status)
		}
	}
	r := f.do("GET", "/v2/tasksets", "Bearer pk_00000000_wrong", nil)
	wantEnvelope(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") != "3" {
		t.Errorf("Retry-After = %q, want 3", r.header.Get("Retry-After"))
	}
	// Sign-in shares the budget; requests without credentials are not throttled.
	wantEnvelope(t, f.do("POST", "/auth/session", "", strings.NewReader(`{"api_key":"pk_00000000_wrong"}`)), 429, "rate_limited")
	if r := f.do("GET", "/healthz", "", nil); r.status != 200 {
		t.Errorf("healthz while throttled = %d", r.status)
	}
	// One failure is earned back every three seconds.
	clock = clock.Add(3 * time.Second)
	if r := f.do("GET", "/v2/tasksets", "key", nil); r.status != 200 {
		t.Errorf("the right key after the wait = %d %s", r.status, r.body)
	}
}

// Behind a shared proxy every client has the proxy's address: one client's bad key must not lock
// out the others, and its own further guesses stay refused.
func TestThrottledAddressStillAcceptsValidCredentials(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	clock := time.Now()
	f.api.throttle.now = func() time.Time { return clock }
	const bad = "Bearer pk_00000000_wrong"
	for range authBurst {
		f.do("GET", "/v2/tasksets", bad, nil)
	}
	wantEnvelope(t, f.do("GET", "/v2/tasksets", bad, nil), 429, "rate_limited")

	for _, auth := range []string{"key", "session"} {
		if r := f.do("GET", "/v2/tasksets", auth, nil); r.status != 200 {
			t.Errorf("a valid %s from the throttled address = %d, want 200: %s", auth, r.status, r.body)
		}
	}
	if r := f.do("POST", "/auth/session", "", strings.NewReader(`{"api_key":"`+f.key+`"}`)); r.status != 200 {
		t.Errorf("signing in with a valid key from the throttled address = %d, want 200: %s", r.status, r.body)
	}

	// The successes refilled nothing: a guess is still refused, with the same wait.
	r := f.do("GET", "/v2/tasksets", bad, nil)
	wantEnvelope(t, r, 429, "rate_limited")
	if r.header.Get("Retry-After") != "3" {
		t.Errorf("Retry-After after the successes = %q, want 3", r.header.Get("Retry-After"))
	}
	wantEnvelope(t, f.do("POST", "/auth/session", "", strings.NewReader(`{"api_key":"pk_00000000_wrong"}`)), 429, "rate_limited")
}
