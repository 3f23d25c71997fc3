package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
)

// deepObject is {"a": {"a": … "bottom"}}, n objects deep.
func deepObject(n int) string {
	return strings.Repeat(`{"a":`, n) + `"bottom"` + strings.Repeat("}", n)
}

// An array the document promises is never null: an environment whose build requires nothing
// answers "required_vars": [] (it answered null), and so does every field tagged so.
func TestArraysTheDocumentPromisesAreNeverNull(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	env, err := registry.Of(f.store).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Of(f.store).CreateBuild(ctx, env.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true,
		Lock: models.BuildLock{Transport: models.TransportStdio}}); err != nil {
		t.Fatal(err)
	}
	r := f.do("POST", "/v2/env-vars/check", "key", strings.NewReader(`{"registry_ids":["`+env.ID.String()+`"]}`))
	for _, field := range []string{"required_vars", "configured_vars", "missing_vars"} {
		if !bytes.Contains(r.body, []byte(`"`+field+`":[]`)) {
			t.Errorf("%s of an environment that requires nothing is not []: %s", field, r.body)
		}
	}

	// The rule holds in one place, for every response: a field tagged nullable:"false" left nil
	// by a handler goes out as [], however deep, and so does a nil body.
	type inner struct {
		Tagged   []string `json:"tagged" nullable:"false"`
		Untagged []string `json:"untagged"`
	}
	type outer struct {
		List  []inner             `json:"list" nullable:"false"`
		ByID  map[string]inner    `json:"by_id"`
		Ptr   *inner              `json:"ptr"`
		Items []struct{ A []int } `json:"items"`
		Raw   object              `json:"raw"`
		Self  map[string]*outer   `json:"self"`
	}
	fill := newNilSlices()
	handed := outer{List: []inner{{}}, ByID: map[string]inner{"x": {}}, Ptr: &inner{}, Self: map[string]*outer{"y": {}}}
	o := fill.apply(handed).(outer)
	if o.List[0].Tagged == nil || o.ByID["x"].Tagged == nil || o.Ptr.Tagged == nil || o.Self["y"].List == nil {
		t.Errorf("nil tagged slices were left: %+v", o)
	}
	if o.List[0].Untagged != nil || o.Items != nil || o.Raw != nil {
		t.Errorf("untagged slices were filled: %+v", o)
	}
	if handed.List[0].Tagged != nil || handed.Ptr.Tagged != nil || handed.Self["y"].List != nil {
		t.Errorf("what the handler handed over (maybe shared) was written: %+v", handed)
	}
	if b := fill.apply([]inner(nil)); b.([]inner) == nil {
		t.Errorf("a nil body = %#v, want []", b)
	}
}

// A method a path does not serve answers 405 in the envelope, with Allow naming the methods it
// does, as the document's description says.
func TestMethodNotAllowedUsesTheEnvelopeAndIsDocumented(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/v2/jobs", "GET"},
		{"PUT", "/v2/jobs/" + uuid.NewString(), "GET, PATCH"},
		{"GET", "/v2/jobs/" + uuid.NewString() + "/publish", "POST"},
	} {
		r := f.do(tc.method, tc.path, "key", nil)
		wantEnvelope(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := r.header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
	doc := f.api.OpenAPI()
	if !strings.Contains(doc.Info.Description, "405") || doc.Components.Responses["MethodNotAllowed"] == nil {
		t.Errorf("the document does not describe 405: %q, %v", doc.Info.Description, doc.Components.Responses)
	}
}

// An open object (request_defaults, args, metrics, metadata, agent_config's own keys …) nests at
// most maxJSONDepth levels counting the body: a 2,000-deep one is a 422 at its location, refused
// before any handler, never stored nor echoed. A body as deep as the bound passes the check.
func TestDeepJSONBodiesAre422AtTheirLocation(t *testing.T) {
	s := storetest.Open(t, models.SQLite)
	f := newFixture(t, s, Options{})
	base := &models.LLMModel{ModelName: "base", Name: "Base", Provider: "proctor", Adapter: models.AdapterOracle, Trainable: true}
	if err := llms.Of(s).UpsertModel(ctx, base); err != nil {
		t.Fatal(err)
	}
	fork, err := llms.Of(s).ForkModel(ctx, f.caller, base.ID, "mine")
	if err != nil {
		t.Fatal(err)
	}
	deepAt := func(prefix string) string {
		return prefix + strings.Repeat(".a", maxJSONDepth-strings.Count(prefix, ".")-strings.Count(prefix, "["))
	}
	for _, tc := range []struct{ name, method, path, body, location string }{
		{"request_defaults", "PATCH", "/v2/models/" + fork.ID.String(), `{"request_defaults":` + deepObject(2000) + `}`, deepAt("body.request_defaults")},
		{"checkpoint metrics", "POST", "/v2/models/" + fork.ID.String() + "/checkpoints",
			`{"name":"c","upstream_model":"u","metrics":` + deepObject(2000) + `}`, deepAt("body.metrics")},
		{"task args", "POST", "/v2/tasks/upload", `{"taskset_name":"t","tasks":[{"name":"a","prompt":"p","args":` + deepObject(2000) + `}]}`,
			deepAt("body.tasks[0].args")},
		{"a deep array", "POST", "/v2/rollouts/run", `{"args":{"x":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}}`,
			"body.args.x" + strings.Repeat("[0]", maxJSONDepth-2)},
	} {
		r := f.do(tc.method, tc.path, "key", strings.NewReader(tc.body))
		wantValidation(t, r, tc.location)
		if bytes.Contains(r.body, []byte(`"bottom"`)) {
			t.Errorf("%s: the answer echoes the deep value: %.300s", tc.name, r.body)
		}
	}
	if m := decode[Model](t, f.do("GET", "/v2/models/"+fork.ID.String(), "key", nil)); len(m.RequestDefaults) != 0 {
		t.Errorf("the deep request_defaults was stored: %v", m.RequestDefaults)
	}
	// At the bound: accepted and stored.
	r := f.do("PATCH", "/v2/models/"+fork.ID.String(), "key", strings.NewReader(`{"request_defaults":`+deepObject(maxJSONDepth-1)+`}`))
	if r.status != 200 {
		t.Errorf("request_defaults %d deep (the body %d) = %d %.300s", maxJSONDepth-1, maxJSONDepth, r.status, r.body)
	}
	// Brackets and braces in strings and keys are text, not nesting.
	r = f.do("PATCH", "/v2/models/"+fork.ID.String(), "key", strings.NewReader(`{"request_defaults":{"s":"`+strings.Repeat(`[{\"`, 100)+`","[{":1}}`))
	if r.status != 200 {
		t.Errorf("brackets in strings = %d %.300s", r.status, r.body)
	}

	// The check costs one scan of the bytes: the deepest body JSON would still decode (9,999) and a
	// 10 MiB run of brackets (to the upload, which takes 10 MiB) are refused about as fast as a
	// small body is answered.
	for _, tc := range []struct {
		name, path string
		body       string
	}{
		{"9,999 deep", "PATCH /v2/models/" + fork.ID.String(), `{"request_defaults":` + deepObject(9_998) + `}`},
		{"10 MiB of [", "POST /v2/tasks/upload", strings.Repeat("[", 10<<20-1)},
	} {
		start := time.Now()
		method, path, _ := strings.Cut(tc.path, " ")
		r := f.do(method, path, "key", strings.NewReader(tc.body))
		took := time.Since(start)
		t.Logf("%s: %d in %v", tc.name, r.status, took)
		if r.status != http.StatusUnprocessableEntity || took > 2*time.Second {
			t.Errorf("%s = %d in %v, want a 422 well within 2s", tc.name, r.status, took)
		}
	}
	// Past the operation's own limit (1 MiB here) the size refuses it before the depth is read.
	wantEnvelope(t, f.do("PATCH", "/v2/models/"+fork.ID.String(), "key", strings.NewReader(strings.Repeat("[", 10<<20-1))), http.StatusRequestEntityTooLarge, "payload_too_large")
}

// jsonTooDeep reads keys, indices, strings and escapes as JSON does.
func TestJSONTooDeepLocations(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{`{}`, 1, ""},
		{`{"a":{}}`, 1, "body.a"},
		{`[1,2,[3]]`, 1, "body[2]"},
		{`{"a":1,"b":[0,{"c":{"d":{}}}]}`, 4, "body.b[1].c.d"},
		{`{"x\"y":{"z":{}}}`, 2, `body.x"y.z`},
		{`{"k":"}}}}{{{{[[[["}`, 1, ""},
		{`{"a":{"b":1},"c":[{"d":[]}]}`, 3, "body.c[0].d"},
		{`{"` + strings.Repeat("k", 1000) + `":{}}`, 1, "body." + strings.Repeat("k", 64) + "…"},
	} {
		if got := jsonTooDeep([]byte(tc.in), tc.max); got != tc.want {
			t.Errorf("jsonTooDeep(%.60s, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
	if got := jsonTooDeep([]byte(deepObject(2000)), maxJSONDepth); got != "body"+strings.Repeat(".a", maxJSONDepth) {
		t.Errorf("2,000 deep: %q", got)
	}
}
