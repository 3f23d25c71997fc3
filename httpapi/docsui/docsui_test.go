package docsui

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const wantCSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"

func get(t *testing.T, h http.Handler, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return res, string(body)
}

func TestIndexPage(t *testing.T) {
	h := Handler("/openapi.json")
	for _, path := range []string{"/", "/index.html"} {
		res, body := get(t, h, http.MethodGet, path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d, want 200", path, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if csp := res.Header.Get("Content-Security-Policy"); csp != wantCSP {
			t.Errorf("GET %s: Content-Security-Policy %q, want %q", path, csp, wantCSP)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q", path, got)
		}
		if !strings.Contains(body, `data-spec-url="/openapi.json"`) {
			t.Errorf("GET %s: spec URL not in page:\n%s", path, body)
		}
		// Assets are referenced relatively so the page works under any prefix.
		for _, ref := range []string{`src="app.js"`, `href="app.css"`} {
			if !strings.Contains(body, ref) {
				t.Errorf("GET %s: page lacks %s", path, ref)
			}
		}
	}
}

// TestIndexNoInlineCode keeps the page compatible with the CSP, which forbids
// inline scripts and styles.
func TestIndexNoInlineCode(t *testing.T) {
	_, body := get(t, Handler("/openapi.json"), http.MethodGet, "/", nil)
	lower := strings.ToLower(body)
	if n, m := strings.Count(lower, "<script"), strings.Count(lower, `<script src="app.js"`); n != m {
		t.Errorf("page has %d <script> tags but only %d load app.js", n, m)
	}
	for _, bad := range []string{"<style", " style=", " onload=", " onclick=", "javascript:"} {
		if strings.Contains(lower, bad) {
			t.Errorf("page contains inline code %q", bad)
		}
	}
}

func TestSpecURLIsEscaped(t *testing.T) {
	for _, specURL := range []string{`/x"><script>alert(1)</script>`, `/spec.json?a=1&b="2"`, `javascript:alert(1)`} {
		_, body := get(t, Handler(specURL), http.MethodGet, "/", nil)
		for _, bad := range []string{`"><script>`, `<script>alert`, `="2"`, `javascript:alert`} {
			if strings.Contains(body, bad) {
				t.Errorf("Handler(%q): page contains unescaped %q:\n%s", specURL, bad, body)
			}
		}
		if !strings.Contains(body, `data-spec-url="`) {
			t.Errorf("Handler(%q): page lacks data-spec-url attribute", specURL)
		}
	}
	_, body := get(t, Handler(`/spec.json?a=1&b=2`), http.MethodGet, "/", nil)
	if !strings.Contains(body, `data-spec-url="/spec.json?a=1&amp;b=2"`) {
		t.Errorf("query string not kept in escaped form:\n%s", body)
	}
}

func TestAssets(t *testing.T) {
	h := Handler("/openapi.json")
	for path, want := range map[string]string{
		"/app.js":  "text/javascript; charset=utf-8",
		"/app.css": "text/css; charset=utf-8",
	} {
		res, body := get(t, h, http.MethodGet, path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", path, res.StatusCode)
		}
		if ct := res.Header.Get("Content-Type"); ct != want {
			t.Errorf("GET %s: Content-Type %q, want %q", path, ct, want)
		}
		if len(body) == 0 {
			t.Errorf("GET %s: empty body", path)
		}
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", path)
		}
		res, _ = get(t, h, http.MethodGet, path, http.Header{"If-None-Match": {etag}})
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: status %d, want 304", path, res.StatusCode)
		}
		res, body = get(t, h, http.MethodHead, path, nil)
		if res.StatusCode != http.StatusOK || body != "" {
			t.Errorf("HEAD %s: status %d, body %d bytes", path, res.StatusCode, len(body))
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := Handler("/openapi.json")
	for _, path := range []string{"/nope.js", "/assets/app.js", "/index.htm", "/app.js/", "/../app.js"} {
		if res, _ := get(t, h, http.MethodGet, path, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, res.StatusCode)
		}
	}
	res, _ := get(t, h, http.MethodPost, "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: status %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
}

// TestMountedUnderPrefix mounts the handler the way the server does.
func TestMountedUnderPrefix(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/docs/", http.StripPrefix("/docs", Handler("/openapi.json")))
	for path, want := range map[string]int{"/docs/": 200, "/docs/app.js": 200, "/docs/app.css": 200, "/docs/x": 404} {
		if res, _ := get(t, mux, http.MethodGet, path, nil); res.StatusCode != want {
			t.Errorf("GET %s: status %d, want %d", path, res.StatusCode, want)
		}
	}
}

// TestAssetsAreOffline makes sure no embedded file can reach the network and
// that the assets stay small.
func TestAssetsAreOffline(t *testing.T) {
	total := 0
	err := fs.WalkDir(assets, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		total += len(b)
		lower := strings.ToLower(string(b))
		for _, bad := range []string{"http://", "https://", "//cdn", "@import", "ws://", "wss://"} {
			if strings.Contains(lower, bad) {
				t.Errorf("%s contains %q", path, bad)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 || total > 100*1024 {
		t.Errorf("embedded assets total %d bytes, want 1..100 KiB", total)
	}
}

// TestScriptAvoidsMarkupSinks enforces that spec text only reaches the DOM as
// text.
func TestScriptAvoidsMarkupSinks(t *testing.T) {
	b, err := assets.ReadFile("assets/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", ".style."} {
		if strings.Contains(string(b), bad) {
			t.Errorf("app.js uses %q", bad)
		}
	}
}
