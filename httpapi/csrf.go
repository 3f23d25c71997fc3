package httpapi

import (
	"net/http"
	"net/url"
)

// Cross-site request forgery: a browser attaches the session cookie to a request that a page
// of another origin makes it send (a form POST, a fetch without CORS), so a request whose only
// credential is that cookie proves nothing about who wrote it. Every state-changing request
// (any method but GET, HEAD and OPTIONS) that would be authenticated by the cookie must
// therefore come from this server's own origin. The check is net/http's CrossOriginProtection:
// the browser's Sec-Fetch-Site header when sent (only "same-origin" and "none", a typed URL or
// bookmark, pass), else the Origin header's host against the request's Host; a request with
// neither header is no browser's cross-site request and passes. The server's public URL is
// trusted as an origin too, for a proxy that rewrites Host in front of an old browser.
//
// A request with an Authorization header is authenticated by it alone (the cookie is not read),
// and no other origin can make a browser send one without a CORS preflight, which /v2 never
// grants; an anonymous request carries nothing to forge. Neither is checked.

// csrfRefusal is the message of the 403 a refused request gets.
const csrfRefusal = "cross-origin request refused: a state-changing request authenticated by the browser session cookie " +
	"must come from this server's own pages; scripts and other sites send an API key ('Authorization: Bearer <key>')"

// newCrossOrigin is the check, trusting publicURL's origin ("" trusts none beyond the request's own).
func newCrossOrigin(publicURL string) *http.CrossOriginProtection {
	c := http.NewCrossOriginProtection()
	if u, err := url.Parse(publicURL); err == nil && u.Scheme != "" && u.Host != "" {
		c.AddTrustedOrigin(u.Scheme + "://" + u.Host) //nolint:errcheck // scheme://host is the form it takes
	}
	return c
}

// cookieAuthenticated reports whether a request's credentials would be its session cookie:
// it sends the cookie and no Authorization header, which takes precedence (authenticate).
func cookieAuthenticated(authorization, cookie string) bool {
	return authorization == "" && cookie != ""
}
