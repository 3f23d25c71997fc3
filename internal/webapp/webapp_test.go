package webapp_test

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/internal/webapp"
)

// The committed build is what web/ builds to: CI fails when the source (or openapi.yaml, which
// the typed client is generated from) changed without a rebuild.
func TestTheCommittedAppIsBuiltFromItsSource(t *testing.T) {
	web := testenv.WebDeps(t)
	out := t.TempDir()
	npm := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir = web
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	start := time.Now()
	npm("npm", "run", "gen")
	npm("npx", "tsc", "--noEmit")
	npm("npx", "vite", "build", "--outDir", out, "--emptyOutDir", "--logLevel", "warn")
	t.Logf("the app built in %s", time.Since(start).Round(time.Millisecond))

	committed := filepath.Join(web, "..", "internal", "webapp", "dist")
	want, got := tree(t, committed), tree(t, out)
	stale := func(why string) {
		t.Fatalf("internal/webapp/dist is stale (%s): rebuild it with `task web` (cd web && npm ci && npm run build) and commit it", why)
	}
	if len(want) != len(got) {
		stale("a different set of files")
	}
	for name, body := range got {
		if c, ok := want[name]; !ok {
			stale(name + " is missing")
		} else if !bytes.Equal(c, body) {
			stale(name + " differs")
		}
	}
}

func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Images may come from object storage's origin, when signed URLs point there, and from nowhere
// else.
func TestTheContentPolicyAdmitsObjectStorageImages(t *testing.T) {
	for origins, want := range map[string]string{
		"":                               "img-src 'self' data: blob:;",
		"https://storage.googleapis.com": "img-src 'self' data: blob: https://storage.googleapis.com;",
	} {
		rec := httptest.NewRecorder()
		webapp.Handler(origins).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, want) {
			t.Errorf("with image origins %q, CSP = %q, want %q", origins, csp, want)
		}
	}
}

// The handler serves the page with a strict CSP, caches hashed assets for good and the page not
// at all, and refuses other methods.
func TestTheHandlerServesTheApp(t *testing.T) {
	srv := httptest.NewServer(webapp.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	body.ReadFrom(res.Body) //nolint:errcheck
	res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") || res.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET / = %d %v", res.StatusCode, res.Header)
	}
	i := strings.Index(body.String(), "/assets/")
	if i < 0 {
		t.Fatalf("the page loads no assets:\n%s", body)
	}
	asset := body.String()[i:]
	asset = asset[:strings.IndexAny(asset, `"'`)]
	res, err = http.Get(srv.URL + asset)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("GET %s = %d %v", asset, res.StatusCode, res.Header)
	}
	if res, err := http.Post(srv.URL+"/", "text/plain", nil); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST / = %v, %v", res, err)
	}
	if res, err := http.Get(srv.URL + "/assets/nope.js"); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset = %v, %v", res, err)
	}
	paths := webapp.Paths()
	if paths[0] != "/" || len(paths) < 2 {
		t.Errorf("Paths() = %v", paths)
	}
}
