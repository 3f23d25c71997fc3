package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

// hostileStrings are values no operation should answer with a 5xx, wherever they land.
var hostileStrings = []string{
	"", "x", "\x00", "a\x00b", "\x1b[31mred", "../../../etc/passwd", "' OR 1=1 --", "%00", "%", "\\u0000",
	strings.Repeat("x", 100_000), "😀\u202e", uuid.Nil.String(), "00000000-0000-0000-0000-00000000000g", "-1", "1e309", "NaN",
	"null", "true", "[]", "{}",
}

// hostileJSON are values of every JSON type, for a field whatever its type.
var hostileJSON = []any{nil, true, -1, 0, 1e308, -1e308, 2147483648, 9.5, "x", "\x00", strings.Repeat("é", 50_000), []any{}, []any{nil, 1, "a"},
	map[string]any{}, map[string]any{"a": map[string]any{"b": []any{}}}, deep(200)}

func deep(n int) any {
	var v any = "bottom"
	for range n {
		v = []any{v}
	}
	return v
}

// TestHostileInputsOverEveryOperation sends every operation of the OpenAPI document hostile path
// parameters, query values, bodies, content types and credentials. No answer may be a 5xx (but
// the 503s of a server without Temporal, which this fixture is: readiness, rollouts, builds), every
// error carries the envelope (the 422 its validation body), and no answer echoes more than a
// bounded part of its input. apitest checks each response against openapi.yaml as well.
func TestHostileInputsOverEveryOperation(t *testing.T) {
	bucket, err := blob.Open(t.Context(), "file://"+t.TempDir(), blob.Options{PublicBaseURL: "http://127.0.0.1", SigningKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	keys, err := secrets.Create(filepath.Join(t.TempDir(), "key.json"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{Bucket: bucket, Secrets: keys})
	oapi := f.api.OpenAPI()
	reg := oapi.Components.Schemas
	requests, ops := 0, 0
	send := func(op *huma.Operation, method, path, contentType, auth string, body io.Reader) {
		t.Helper()
		requests++
		req, err := http.NewRequest(method, f.srv.URL+path, body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		switch auth {
		case "key":
			req.Header.Set("Authorization", "Bearer "+f.key)
		case "bad":
			req.Header.Set("Authorization", "Bearer pk_00000000_"+strings.Repeat("z", 40))
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		where := fmt.Sprintf("%s (%s %.120s, %s)", op.OperationID, method, path, contentType)
		// By design: readiness answers 503 with its checks while Temporal is not configured, and
		// the rollout routes 503 without an engine.
		if op.OperationID == "readyz" && res.StatusCode == 503 {
			return
		}
		if res.StatusCode >= 500 && !(res.StatusCode == 503 && (strings.Contains(string(b), "runs no rollout engine") || strings.Contains(string(b), "runs no builds"))) {
			t.Errorf("%s answered %d: %.300s", where, res.StatusCode, b)
		}
		if len(b) > 64<<10 && res.StatusCode >= 400 {
			t.Errorf("%s answered a %d of %d bytes", where, res.StatusCode, len(b))
		}
		if res.StatusCode >= 400 {
			var env ErrorBody
			var problem huma.ErrorModel
			switch {
			case res.StatusCode == 422:
				if json.Unmarshal(b, &problem) != nil || problem.Status != 422 {
					t.Errorf("%s: a 422 without the validation body: %.300s", where, b)
				}
			case json.Unmarshal(b, &env) != nil || env.Error.Code == "" || env.Error.Message == "":
				t.Errorf("%s: a %d without the envelope: %.300s", where, res.StatusCode, b)
			}
		}
	}
	// Fill path parameters: each with a fresh uuid, or every one with the given value.
	fill := func(path, with string) string {
		return pathParam.ReplaceAllStringFunc(path, func(string) string {
			if with == "" {
				return uuid.NewString()
			}
			return url.PathEscape(with)
		})
	}

	for _, path := range slices.Sorted(maps.Keys(oapi.Paths)) {
		item := oapi.Paths[path]
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete} {
			if op == nil {
				continue
			}
			ops++
			for _, auth := range []string{"", "bad"} {
				send(op, method, fill(path, ""), "application/json", auth, strings.NewReader("{}"))
			}
			if pathParam.MatchString(path) {
				for _, v := range hostileStrings {
					if v == "" {
						continue // an empty segment is another route
					}
					send(op, method, fill(path, v), "", "key", nil)
				}
			}
			for _, p := range op.Parameters {
				if p.In != "query" {
					continue
				}
				for _, v := range hostileStrings {
					send(op, method, fill(path, "")+"?"+url.QueryEscape(p.Name)+"="+url.QueryEscape(v), "", "key", nil)
				}
				send(op, method, fill(path, "")+"?"+p.Name+"=1&"+p.Name+"=2", "", "key", nil)
			}
			if op.RequestBody == nil {
				continue
			}
			for _, raw := range []string{"", "not json", "{", "null", "[]", `"s"`, "1", `{"a":` + strings.Repeat("[", 10_000), strings.Repeat(" ", 1000) + "{}",
				`{"\u0000": 1}`, "{}\x00"} {
				send(op, method, fill(path, ""), "application/json", "key", strings.NewReader(raw))
			}
			for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "application/xml"} {
				send(op, method, fill(path, ""), ct, "key", strings.NewReader(`{"a": 1}`))
			}
			send(op, method, fill(path, ""), "application/json", "key", strings.NewReader(`{"a": "`+strings.Repeat("x", 2<<20)+`"}`))
			// Each property of the body, in turn, holds each hostile value.
			schema := op.RequestBody.Content["application/json"].Schema
			if schema != nil && schema.Ref != "" {
				schema = reg.SchemaFromRef(schema.Ref)
			}
			if schema == nil {
				continue
			}
			for _, prop := range slices.Sorted(maps.Keys(schema.Properties)) {
				for _, v := range hostileJSON {
					b, _ := json.Marshal(map[string]any{prop: v})
					send(op, method, fill(path, ""), "application/json", "key", strings.NewReader(string(b)))
				}
			}
		}
	}
	if ops < 40 {
		t.Fatalf("only %d operations in the document", ops)
	}
	t.Logf("%d hostile requests over %d operations", requests, ops)
}
