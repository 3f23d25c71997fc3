// Package docsui serves an offline API reference page for the /v2 OpenAPI
// document.
//
// The page is a small, self-written HTML/CSS/JavaScript application that is
// embedded into the binary with go:embed. At run time it fetches the OpenAPI
// JSON from the same origin and renders it: operations grouped by tag in a
// filterable sidebar, parameter tables, request and response schemas as
// collapsible property trees, and a "Try it" form that sends requests with a
// bearer token. It loads nothing from the network besides the spec and the
// API itself (no CDN, no web fonts), and the page is served with a strict
// Content-Security-Policy that allows only same-origin scripts, styles and
// connections.
//
// The package imports only the standard library.
package docsui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"time"
)

//go:embed assets
var assets embed.FS

// contentSecurityPolicy is sent with every response of the handler. It forbids
// inline scripts and styles and any connection to another origin.
const contentSecurityPolicy = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"

// indexTemplate is the page shell; html/template escapes the spec URL for the
// attribute context it is placed in.
var indexTemplate = template.Must(template.ParseFS(assets, "assets/index.html"))

// staticAssets maps request paths to embedded files and their content types.
var staticAssets = map[string]struct{ file, contentType string }{
	"/app.js":  {"assets/app.js", "text/javascript; charset=utf-8"},
	"/app.css": {"assets/app.css", "text/css; charset=utf-8"},
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

func newAsset(body []byte, contentType string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Handler serves the reference page at "/" of whatever prefix it is mounted
// under (the server mounts it with http.StripPrefix("/docs", ...) and also
// redirects /docs to /docs/), plus its embedded assets. specURL is the URL the
// page fetches the OpenAPI JSON from (the server passes "/openapi.json").
func Handler(specURL string) http.Handler {
	var page bytes.Buffer
	if err := indexTemplate.Execute(&page, struct{ SpecURL string }{specURL}); err != nil {
		// The template is embedded and the only input is a string, so this
		// cannot happen short of a broken build.
		panic("docsui: rendering index page: " + err.Error())
	}
	index := newAsset(page.Bytes(), "text/html; charset=utf-8")
	files := map[string]asset{"/": index, "/index.html": index}
	for path, a := range staticAssets {
		body, err := assets.ReadFile(a.file)
		if err != nil {
			panic("docsui: missing embedded asset " + a.file + ": " + err.Error())
		}
		files[path] = newAsset(body, a.contentType)
	}

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")

		path := r.URL.Path
		if path == "" {
			path = "/"
		}
		a, ok := files[path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, path, time.Time{}, bytes.NewReader(a.body))
	})
}
