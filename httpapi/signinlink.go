package httpapi

import (
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/proctorhq/proctor/models"
)

// Sign-in links (proctor open): a member with an API key asks for a one-time link that signs a
// browser in to the web app at a page. Like /auth/session, it lives outside /v2 (the spec leaves
// the issuing of sessions open). Opening the link signs nobody in: its page names the account
// and asks to continue, and only that page's own POST (same origin, checked as sign-in is)
// redeems the link, once: a link scanner or a page elsewhere cannot use it, nor sign a browser in
// to an account of its choosing.

// linkPage is where a sign-in link may lead: a route of the web app (its fragment), such as
// "jobs/ID" or "traces/ID".
var linkPage = regexp.MustCompile(`^[A-Za-z0-9/_-]{0,200}$`)

// handleCreateSignInLink serves POST /auth/link: {"page"} → {"url", "expires_at"}, for an API key.
func (s *Server) handleCreateSignInLink(w http.ResponseWriter, r *http.Request) {
	caller, fail := s.resolveCaller(r.Context(), r.Header.Get("Authorization"), "", r.RemoteAddr)
	switch {
	case fail != nil:
		writeAuthFailure(w, fail)
		return
	case caller == nil || caller.Kind != models.CredentialAPIKey:
		writeError(w, http.StatusUnauthorized, "a sign-in link is made for an API key: send it as 'Authorization: Bearer <key>'")
		return
	}
	var body struct {
		Page string `json:"page"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil {
			writeError(w, http.StatusBadRequest, `send {"page": "<a page of the web app, e.g. jobs/ID>"} as JSON, or no body`)
			return
		}
	}
	body.Page = strings.Trim(body.Page, "#/")
	if !linkPage.MatchString(body.Page) {
		writeError(w, http.StatusUnprocessableEntity, "page: a route of the web app, such as jobs/ID or traces/ID (letters, digits, /, _ and -)")
		return
	}
	token, expires, err := s.store.CreateSignInLink(r.Context(), caller.MembershipID, &caller.APIKeyID)
	if err != nil {
		s.log.ErrorContext(r.Context(), "sign-in link", "error", err)
		writeError(w, http.StatusInternalServerError, "could not make a sign-in link")
		return
	}
	q := url.Values{"token": {token}}
	if body.Page != "" {
		q.Set("page", body.Page)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(map[string]string{"url": s.origin(r) + "/auth/link?" + q.Encode(), "expires_at": expires.Format(time.RFC3339)}) //nolint:errcheck
}

// origin is the server's public URL, or (none configured) the one the request reached.
func (s *Server) origin(r *http.Request) string {
	if s.publicURL != "" {
		return s.publicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

var linkPageHTML = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>Sign in to Proctor</title>
<style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.5rem 1rem}</style>
</head><body><main>
{{if .For}}<h1>Sign in to Proctor</h1>
<p>This link signs this browser in as <strong>{{.For.Email}}</strong>{{if .For.Name}} ({{.For.Name}}){{end}}, team <strong>{{.For.Team}}</strong>.</p>
<form method="post" action="/auth/link/redeem"><input type="hidden" name="token" value="{{.Token}}"><input type="hidden" name="page" value="{{.Page}}">
<button type="submit">Continue as {{.For.Email}}</button></form>
<p>Not you, or not asked for by you? Close this page: the link expires unused.</p>
{{else}}<h1>This sign-in link cannot be used</h1>
<p>It expired, was used already, or its API key was revoked. Run <code>proctor open</code> again for a new one.</p>{{end}}
</main></body></html>
`))

// handleSignInLinkPage serves GET /auth/link?token&page: the page that names the account and
// asks to continue. It uses nothing.
func (s *Server) handleSignInLinkPage(w http.ResponseWriter, r *http.Request) {
	token, page := r.URL.Query().Get("token"), strings.Trim(r.URL.Query().Get("page"), "#/")
	if !linkPage.MatchString(page) {
		page = ""
	}
	who, err := s.store.PeekSignInLink(r.Context(), token)
	status := http.StatusOK
	if err != nil {
		if !errors.Is(err, models.ErrInvalidCredentials) {
			s.log.ErrorContext(r.Context(), "sign-in link", "error", err)
		}
		who, status = nil, http.StatusGone
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	linkPageHTML.Execute(w, struct { //nolint:errcheck // the page is written or the client left
		For         *models.SignInLinkFor
		Token, Page string
	}{who, token, page})
}

// handleRedeemSignInLink serves POST /auth/link/redeem (the form of the link's page): the link is used,
// once, for a session cookie, and the browser goes to its page in the web app.
func (s *Server) handleRedeemSignInLink(w http.ResponseWriter, r *http.Request) {
	if s.crossOrigin.Check(r) != nil {
		writeError(w, http.StatusForbidden, "sign-in from another origin is refused")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "send the link's form as it is")
		return
	}
	page := strings.Trim(r.PostForm.Get("page"), "#/")
	if !linkPage.MatchString(page) {
		page = ""
	}
	sess, token, err := s.store.RedeemSignInLink(r.Context(), r.PostForm.Get("token"), s.sessionTTL)
	if errors.Is(err, models.ErrInvalidCredentials) {
		s.refusedCredentials(w, r, http.StatusGone, "this sign-in link expired, was used already, or its API key was revoked: run proctor open again")
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "sign-in link", "error", err)
		writeError(w, http.StatusInternalServerError, "could not sign in")
		return
	}
	s.setSessionCookie(w, sess, token)
	http.Redirect(w, r, "/#/"+page, http.StatusSeeOther)
}
