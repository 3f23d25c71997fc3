package httpapi

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// TestEveryRouteRefusesMissingCredentialsAndMalformedIDs walks the OpenAPI document, so that a
// route added later is held to the same rules: without credentials every route that needs them
// answers 401 with the envelope, and a malformed uuid in its path answers 422 at that location.
func TestEveryRouteRefusesMissingCredentialsAndMalformedIDs(t *testing.T) {
	storetest.Each(t, testEveryRoute)
}

func testEveryRoute(t *testing.T, store *models.Store) {
	f := newFixture(t, store, Options{})
	checked := 0
	for path, item := range f.api.OpenAPI().Paths {
		if !strings.HasPrefix(path, "/v2/") {
			continue
		}
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "POST": item.Post, "PATCH": item.Patch, "PUT": item.Put, "DELETE": item.Delete} {
			if op == nil {
				continue
			}
			checked++
			anonymous, sessionOnly := false, true
			for _, req := range op.Security {
				if len(req) == 0 {
					anonymous = true
				}
				if _, ok := req["session"]; !ok || len(req) != 1 {
					sessionOnly = false
				}
			}
			send := func(p, auth string) response {
				if method == "GET" || method == "DELETE" {
					return f.do(method, p, auth, nil)
				}
				return f.do(method, p, auth, strings.NewReader("{}"))
			}
			segments := strings.Split(path, "/")
			withIDs := func(bad string) string {
				out := make([]string, len(segments))
				for i, s := range segments {
					switch {
					case bad != "" && s == bad:
						out[i] = "not-a-uuid"
					case pathParam.MatchString(s):
						out[i] = uuid.NewString()
					default:
						out[i] = s
					}
				}
				return strings.Join(out, "/")
			}
			name := method + " " + path
			if !anonymous {
				if r := send(withIDs(""), ""); r.status != http.StatusUnauthorized {
					t.Errorf("%s without credentials: %d, want 401: %s", name, r.status, r.body)
				} else {
					wantEnvelope(t, r, http.StatusUnauthorized, "unauthorized")
				}
			}
			auth := "key"
			if sessionOnly {
				auth = "session"
			}
			for _, param := range pathParam.FindAllString(path, -1) {
				if param == "{name}" {
					continue // a taskset name is any string
				}
				r := send(withIDs(param), auth)
				if r.status != http.StatusUnprocessableEntity {
					t.Errorf("%s with %s=not-a-uuid: %d, want 422: %s", name, param, r.status, r.body)
					continue
				}
				wantValidation(t, r, "path."+strings.Trim(param, "{}"))
			}
		}
	}
	if checked == 0 {
		t.Fatal("the walk found no /v2 operation")
	}
	t.Logf("checked %d /v2 operations", checked)
}
