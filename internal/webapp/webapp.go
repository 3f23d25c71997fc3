// Package webapp serves Proctor's web app: the single-page app built from web/ (npm run build)
// into dist/, committed so that `go build` needs no Node, and embedded here. It is a client of
// /v2 (and /auth/session) only; the server mounts it at /.
package webapp

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// contentPolicy lets the app load its own scripts, styles and images (data: and blob: for images
// it makes, imageOrigins for the trace images object storage serves) and talk to its own origin
// only.
func contentPolicy(imageOrigins []string) string {
	img := "img-src 'self' data: blob:"
	for _, o := range imageOrigins {
		if o != "" {
			img += " " + o
		}
	}
	return "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " + img + "; " +
		"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
}

// Handler serves the app: its files, and index.html for / (routes live in the URL's fragment).
// Hashed assets are cached for a year; index.html is revalidated, so a new binary's app loads.
// imageOrigins are where images may come from besides the app's origin: object storage's, whose
// signed URLs the trace's images are.
func Handler(imageOrigins ...string) http.Handler {
	csp := contentPolicy(imageOrigins)
	root, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees dist
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		if strings.HasPrefix(p, "/assets/") {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		files.ServeHTTP(w, r)
	})
}

// Paths are the URL paths the app's files answer at (/ and each top-level file or folder of
// dist), for the server to route to Handler.
func Paths() []string {
	entries, err := fs.ReadDir(dist, "dist")
	if err != nil {
		return []string{"/"}
	}
	out := []string{"/"}
	for _, e := range entries {
		if e.Name() == "index.html" {
			continue
		}
		if e.IsDir() {
			out = append(out, "/"+e.Name()+"/*")
		} else {
			out = append(out, "/"+e.Name())
		}
	}
	return out
}
