package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

// proctor open's link: made for an API key, shown as a page that names the account and uses
// nothing, redeemed once by that page's own form for a session cookie, and never a cookie
// itself.
func TestASignInLinkSignsABrowserInOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		made := f.do("POST", "/auth/link", "key", strings.NewReader(`{"page": "#/jobs/abc"}`))
		var link struct{ URL, ExpiresAt string }
		if json.Unmarshal(made.body, &struct {
			URL       *string `json:"url"`
			ExpiresAt *string `json:"expires_at"`
		}{&link.URL, &link.ExpiresAt}) != nil || made.status != 200 || !strings.HasPrefix(link.URL, f.srv.URL+"/auth/link?") {
			t.Fatalf("POST /auth/link = %d %s", made.status, made.body)
		}
		u, _ := url.Parse(link.URL)
		token, page := u.Query().Get("token"), u.Query().Get("page")
		if !strings.HasPrefix(token, "pl-") || page != "jobs/abc" {
			t.Fatalf("the link %s: token %q, page %q", link.URL, token, page)
		}

		// Only an API key makes one, for a page of the app.
		wantEnvelope(t, f.do("POST", "/auth/link", "session", strings.NewReader(`{}`)), 401, "unauthorized")
		wantEnvelope(t, f.do("POST", "/auth/link", "", nil), 401, "unauthorized")
		if r := f.do("POST", "/auth/link", "key", strings.NewReader(`{"page": "https://elsewhere.example/"}`)); r.status != 422 {
			t.Errorf("a link to elsewhere = %d %s, want 422", r.status, r.body)
		}
		// The token is no session cookie.
		req, _ := http.NewRequest("GET", f.srv.URL+"/v2/jobs", nil)
		req.AddCookie(&http.Cookie{Name: SessionCookie, Value: token})
		if r := f.send(req); r.status != 401 {
			t.Errorf("the link's token as a cookie = %d, want 401", r.status)
		}

		// Its page names the account, and opening it (twice: a link preview) uses nothing.
		for range 2 {
			r := f.do("GET", "/auth/link?"+u.RawQuery, "", nil)
			if r.status != 200 || !strings.Contains(string(r.body), "<strong>ada@example.com</strong>") || !strings.Contains(string(r.body), `action="/auth/link/redeem"`) {
				t.Fatalf("the link's page = %d\n%s", r.status, r.body)
			}
		}

		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		redeem := func(site string) *http.Response {
			t.Helper()
			req, _ := http.NewRequest("POST", f.srv.URL+"/auth/link/redeem", strings.NewReader(url.Values{"token": {token}, "page": {page}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", site)
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body) //nolint:errcheck
			res.Body.Close()
			return res
		}
		// A page elsewhere cannot redeem it.
		if res := redeem("cross-site"); res.StatusCode != 403 {
			t.Errorf("a cross-site redeem = %d, want 403", res.StatusCode)
		}
		res := redeem("same-origin")
		var cookie *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == SessionCookie {
				cookie = c
			}
		}
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/#/jobs/abc" || cookie == nil || !cookie.HttpOnly {
			t.Fatalf("redeem = %d to %q, cookie %+v", res.StatusCode, res.Header.Get("Location"), cookie)
		}
		req, _ = http.NewRequest("GET", f.srv.URL+"/v2/jobs", nil)
		req.AddCookie(cookie)
		if r := f.send(req); r.status != 200 {
			t.Errorf("the session the link gave = %d %s", r.status, r.body)
		}
		// Once only.
		if res := redeem("same-origin"); res.StatusCode != http.StatusGone {
			t.Errorf("a second redeem = %d, want 410", res.StatusCode)
		}
		if r := f.do("GET", "/auth/link?"+u.RawQuery, "", nil); r.status != http.StatusGone || !strings.Contains(string(r.body), "cannot be used") {
			t.Errorf("the used link's page = %d\n%s", r.status, r.body)
		}
	})
}
