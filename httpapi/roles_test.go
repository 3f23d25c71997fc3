package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
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
	"github.com/proctorhq/proctor/models/billing"
)

// writeOps lists the API's registered write operations by "METHOD /path".
func writeOps(api *Server) map[string]*huma.Operation {
	out := map[string]*huma.Operation{}
	for path, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Post, item.Put, item.Patch, item.Delete} {
			if op != nil {
				out[op.Method+" "+path] = op
			}
		}
	}
	return out
}

// teamMember adds a member-role membership to f's team, with an API key and a session.
func teamMember(t *testing.T, f *fixture) (m *models.Membership, key, session string) {
	t.Helper()
	_, m, err := f.store.AddMember(ctx, f.caller.TeamID, "Bob", "bob@example.com", models.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	if _, key, err = f.store.CreateAPIKey(ctx, m.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, session, err = f.store.CreateSession(ctx, m.ID, nil, 3600e9); err != nil {
		t.Fatal(err)
	}
	return m, key, session
}

// asCaller sends a request with the given bearer key, or with the session cookie when key is "".
func asCaller(f *fixture, method, path, key, session string, body string) response {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	} else {
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: session})
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return f.send(req)
}

// isOwnerRefusal reports whether r is the role middleware's 403.
func isOwnerRefusal(r response) bool {
	var env ErrorBody
	return r.status == http.StatusForbidden && json.Unmarshal(r.body, &env) == nil && env.Error.Message == ownerRefusal
}

// TestEveryWriteAsAMember calls every registered write operation as a member-role caller: an
// owner-only one answers 403 with the envelope, before anything else is looked at; any other is
// never refused for the caller's role (whatever else its empty body and unknown ids earn).
func TestEveryWriteAsAMember(t *testing.T) {
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
	_, key, session := teamMember(t, f)
	ops := writeOps(f.api)
	if len(ops) < 50 {
		t.Fatalf("only %d write operations registered", len(ops))
	}
	owners := 0
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		op := ops[name]
		t.Run(op.OperationID, func(t *testing.T) {
			path := pathParam.ReplaceAllStringFunc(op.Path, func(string) string { return uuid.NewString() })
			for _, p := range op.Parameters {
				if p.In == "query" && p.Required {
					path += "?" + p.Name + "=" + uuid.NewString()
					break
				}
			}
			body := ""
			if op.RequestBody != nil {
				body = "{}"
			}
			// The credential the operation accepts: an API key, else the session.
			k := key
			if !slices.ContainsFunc(op.Security, func(req map[string][]string) bool { _, ok := req["bearer"]; return ok }) {
				k = ""
			}
			r := asCaller(f, op.Method, path, k, session, body)
			switch roleOf(op) {
			case roleOwner:
				owners++
				wantEnvelope(t, r, http.StatusForbidden, "forbidden")
				if !isOwnerRefusal(r) {
					t.Errorf("%s: a 403 that is not the role's: %s", name, r.body)
				}
			default:
				if r.status == http.StatusUnauthorized || isOwnerRefusal(r) {
					t.Errorf("%s: a member is refused: %d %s", name, r.status, r.body)
				}
			}
		})
	}
	if owners == 0 {
		t.Error("no owner-only operation")
	}
}

// TestOwnerPassesTheRole: an owner-role caller is not refused on owner-only operations.
func TestOwnerPassesTheRole(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v2/jobs/" + uuid.NewString() + "/publish", ""},
		{"PUT", "/v2/env-vars/batch", `{"registry_id":"` + uuid.NewString() + `","variables":[]}`},
		{"POST", "/v2/trace/batch-validate", `{"trace_ids":[],"is_valid":false}`},
	} {
		r := asCaller(f, c.method, c.path, f.key, "", c.body)
		if isOwnerRefusal(r) || r.status == http.StatusUnauthorized {
			t.Errorf("owner's %s %s = %d %s", c.method, c.path, r.status, r.body)
		}
	}
}

// TestAMemberCannotLiftOrImposeSpendingLimits is the report that made limits owner-only: a member
// blocked by a limit could disable or delete it, and could block the owner.
func TestAMemberCannotLiftOrImposeSpendingLimits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		bob, key, session := teamMember(t, f)
		owner := f.key
		created := decode[Limit](t, asCaller(f, "POST", "/v2/limits", owner, "", fmt.Sprintf(`{"interval":"month","action":"block","amount_usd":0.000001,"membership_id":%d}`, bob.ID)))
		if created.ID == uuid.Nil {
			t.Fatal("the owner could not create a limit")
		}
		limit := "/v2/limits/" + created.ID.String()

		for _, c := range []struct{ method, path, body string }{
			{"PATCH", limit, `{"enabled":false}`},
			{"PATCH", limit, `{"amount_usd":1000000}`},
			{"DELETE", limit, ""},
			{"POST", "/v2/limits", fmt.Sprintf(`{"interval":"week","action":"block","amount_usd":0.000001,"membership_id":%d}`, f.caller.MembershipID)},
			{"POST", "/v2/limits", fmt.Sprintf(`{"interval":"week","action":"block","amount_usd":0.000001,"membership_id":%d}`, bob.ID)},
		} {
			for _, cred := range []struct{ key, session string }{{key, ""}, {"", session}} {
				r := asCaller(f, c.method, c.path, cred.key, cred.session, c.body)
				wantEnvelope(t, r, http.StatusForbidden, "forbidden")
				if !isOwnerRefusal(r) {
					t.Errorf("member's %s %s: %s", c.method, c.path, r.body)
				}
			}
		}
		rows, err := billing.Of(s).ListLimits(ctx, f.caller)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || !rows[0].Enabled || rows[0].AmountUSD != 0.000001 {
			t.Fatalf("after the member's tries, limits = %+v, want the owner's one, unchanged", rows)
		}
		// The member still reads them.
		if r := asCaller(f, "GET", "/v2/limits", key, "", ""); r.status != http.StatusOK {
			t.Errorf("member's list = %d %s", r.status, r.body)
		}
		// The owner changes and deletes it.
		if r := asCaller(f, "PATCH", limit, owner, "", `{"enabled":false}`); r.status != http.StatusOK {
			t.Errorf("owner's PATCH = %d %s", r.status, r.body)
		}
		if r := asCaller(f, "DELETE", limit, owner, "", ""); r.status != http.StatusNoContent {
			t.Errorf("owner's DELETE = %d %s", r.status, r.body)
		}
	})
}

// TestRolesTableInTheREADME holds the README's table of write operations and their roles equal to
// the operations' metadata and to what the document states (x-proctor-role).
func TestRolesTableInTheREADME(t *testing.T) {
	table := readmeRoles(t)
	ops := writeOps(New(Options{Logger: slog.New(slog.DiscardHandler)}))
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		op := ops[name]
		if op.Extensions[extRole] != string(roleOf(op)) {
			t.Errorf("%s: x-proctor-role %v, metadata %q", name, op.Extensions[extRole], roleOf(op))
		}
		switch want, ok := table[name]; {
		case !ok:
			t.Errorf("%s (%s) is not in README.md's Roles table: add it, owner or member, with why", name, roleOf(op))
		case want != roleOf(op):
			t.Errorf("%s: README.md says %s, the operation requires %s", name, want, roleOf(op))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(table)) {
		if ops[name] == nil {
			t.Errorf("README.md's Roles table names %s, which is no write operation", name)
		}
	}
}

// readmeRoles parses the table under "### Roles" in README.md: "| METHOD | `path` | role | why |".
func readmeRoles(t *testing.T) map[string]role {
	t.Helper()
	file, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	out := map[string]role{}
	in, rows := false, 0
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "#"):
			if in {
				return out
			}
			in = line == "### Roles"
		case !in || !strings.HasPrefix(line, "|"):
		case strings.HasPrefix(line, "| Method") || strings.HasPrefix(line, "| ---"):
		default:
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 4 {
				t.Fatalf("README.md Roles row %q: want 4 cells", line)
			}
			method, path := strings.TrimSpace(cells[0]), strings.Trim(strings.TrimSpace(cells[1]), "`")
			r := role(strings.TrimSpace(cells[2]))
			if r != roleOwner && r != roleMember {
				t.Errorf("README.md Roles row %q: who may is %q, want owner or member", line, r)
			}
			if strings.TrimSpace(cells[3]) == "" {
				t.Errorf("README.md Roles row %q gives no reason", line)
			}
			if _, dup := out[method+" "+path]; dup {
				t.Errorf("README.md Roles table lists %s %s twice", method, path)
			}
			out[method+" "+path] = r
			rows++
		}
	}
	if rows == 0 {
		t.Fatal(`README.md has no "### Roles" table`)
	}
	return out
}
