package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"

	"github.com/proctorhq/proctor/models"
)

// authMode is what an operation accepts as credentials; it is stored in the operation's metadata
// and enforced by one middleware, so that each route states its rule where it is registered.
type authMode string

const (
	// authKeyOrSession: an API key or a browser session (the default).
	authKeyOrSession authMode = "key_or_session"
	// authAPIKey: an API key only (taskset export, by-name lookup).
	authAPIKey authMode = "api_key"
	// authSession: a browser session only; an API key gets 401 (briefs, uploads).
	authSession authMode = "session"
	// authOptional: anonymous callers pass; credentials, when sent, must be valid and widen what
	// is visible (published jobs and traces, public tasksets).
	authOptional authMode = "optional"
	// authNone: no credentials are read at all.
	authNone authMode = "none"
)

// SessionCookie names the browser-session cookie.
const SessionCookie = "proctor_session"

const metaAuth = "auth"

// Security requirement objects for the OpenAPI document.
var (
	securityBearer   = []map[string][]string{{"bearer": {}}, {"session": {}}}
	securityAPIKey   = []map[string][]string{{"bearer": {}}}
	securitySession  = []map[string][]string{{"session": {}}}
	securityOptional = []map[string][]string{{}, {"bearer": {}}, {"session": {}}}
	// securityNone states "anonymous" explicitly rather than leaving security out.
	securityNone = []map[string][]string{{}}
)

func securityFor(mode authMode) []map[string][]string {
	switch mode {
	case authAPIKey:
		return securityAPIKey
	case authSession:
		return securitySession
	case authOptional:
		return securityOptional
	case authNone:
		return securityNone
	default:
		return securityBearer
	}
}

type callerKey struct{}

// callerFrom returns the authenticated caller, or nil for an anonymous one on an optional route.
func callerFrom(ctx context.Context) *models.Caller {
	c, _ := ctx.Value(callerKey{}).(*models.Caller)
	return c
}

// authenticate resolves the caller from the bearer header or the session cookie. No credentials is
// (nil, nil); credentials that do not check out are models.ErrInvalidCredentials.
func (s *Server) authenticate(ctx context.Context, header string, cookie string) (*models.Caller, error) {
	if header != "" {
		scheme, token, ok := strings.Cut(header, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
			return nil, models.ErrInvalidCredentials
		}
		return s.store.AuthenticateAPIKey(ctx, strings.TrimSpace(token))
	}
	if cookie != "" {
		return s.store.AuthenticateSession(ctx, cookie)
	}
	return nil, nil
}

// authFailure is why a request's credentials were not accepted, as its answer.
type authFailure struct {
	status     int
	msg        string
	retryAfter string // for a 429
}

// resolveCaller resolves the caller of a request from its Authorization header or session cookie
// (nil, nil without either). Credentials that do not check out count against the client's
// address: 401 within its budget, 429 past it (throttle.go); valid ones pass from any address.
func (s *Server) resolveCaller(ctx context.Context, header, cookie, remoteAddr string) (*models.Caller, *authFailure) {
	caller, err := s.authenticate(ctx, header, cookie)
	switch {
	case errors.Is(err, models.ErrInvalidCredentials):
		if wait := s.throttle.failed(clientHost(remoteAddr)); wait > 0 {
			return nil, &authFailure{http.StatusTooManyRequests, throttledMessage, retryAfter(wait)}
		}
		return nil, &authFailure{status: http.StatusUnauthorized, msg: "invalid credentials: the API key or session is unknown, revoked or expired"}
	case err != nil:
		s.log.ErrorContext(ctx, "authenticate", "error", err)
		return nil, &authFailure{status: http.StatusInternalServerError, msg: "could not check credentials"}
	}
	return caller, nil
}

// authMiddleware enforces each operation's authMode, and refuses a state-changing request from
// another origin that rides the session cookie on a route that takes a session (csrf.go).
func (s *Server) authMiddleware(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		mode, _ := ctx.Operation().Metadata[metaAuth].(authMode)
		if mode == authNone {
			next(ctx)
			return
		}
		cookie := ""
		if c, err := huma.ReadCookie(ctx, SessionCookie); err == nil {
			cookie = c.Value
		}
		authorization := ctx.Header("Authorization")
		if h, _ := ctx.Operation().Metadata[metaKeyHeader].(string); h != "" && authorization == "" {
			if key := ctx.Header(h); key != "" {
				authorization = "Bearer " + key
			}
		}
		// Checked before the cookie is looked up, so that a forged request costs no query and
		// counts no failed authentication (csrf.go).
		if mode != authAPIKey && cookieAuthenticated(authorization, cookie) {
			if r, _ := humachi.Unwrap(ctx); s.crossOrigin.Check(r) != nil {
				huma.WriteErr(api, ctx, http.StatusForbidden, csrfRefusal) //nolint:errcheck
				return
			}
		}
		caller, fail := s.resolveCaller(ctx.Context(), authorization, cookie, ctx.RemoteAddr())
		if fail != nil {
			if fail.retryAfter != "" {
				ctx.SetHeader("Retry-After", fail.retryAfter)
			}
			huma.WriteErr(api, ctx, fail.status, fail.msg) //nolint:errcheck
			return
		}
		switch {
		case mode == authOptional:
		case caller == nil:
			huma.WriteErr(api, ctx, http.StatusUnauthorized, "missing credentials: send an API key as 'Authorization: Bearer <key>'") //nolint:errcheck
			return
		case mode == authSession && caller.Kind != models.CredentialSession:
			huma.WriteErr(api, ctx, http.StatusUnauthorized, "this route needs a signed-in browser session; API keys are not accepted") //nolint:errcheck
			return
		case mode == authAPIKey && caller.Kind != models.CredentialAPIKey:
			huma.WriteErr(api, ctx, http.StatusUnauthorized, "this route needs an API key ('Authorization: Bearer <key>')") //nolint:errcheck
			return
		}
		if caller != nil {
			ctx = huma.WithValue(ctx, callerKey{}, caller)
		}
		next(ctx)
	}
}

// writeAuthFailure answers a request whose credentials did not resolve (resolveCaller).
func writeAuthFailure(w http.ResponseWriter, fail *authFailure) {
	if fail.retryAfter != "" {
		w.Header().Set("Retry-After", fail.retryAfter)
	}
	writeError(w, fail.status, fail.msg)
}

// refusedCredentials answers a sign-in whose credential was no good: 429 once the client has
// failed too often (throttle), else status with msg.
func (s *Server) refusedCredentials(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if wait := s.throttle.failed(clientHost(r.RemoteAddr)); wait > 0 {
		w.Header().Set("Retry-After", retryAfter(wait))
		writeError(w, http.StatusTooManyRequests, throttledMessage)
		return
	}
	writeError(w, status, msg)
}

// setSessionCookie hands the browser its session.
func (s *Server) setSessionCookie(w http.ResponseWriter, sess *models.Session, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: token, Path: "/", Expires: sess.ExpiresAt,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies,
	})
}

// handleLogin signs a browser in: it exchanges an API key for a session cookie. It lives outside
// /v2 because the spec leaves the issuing of sessions open.
//
// Only JSON is accepted (a form or text/plain body is what a cross-site page can send without a
// preflight), and a browser's request must come from this server's own origin, by the same
// check as the session's writes (csrf.go): a page elsewhere cannot sign a browser in to an
// account of its choosing (login CSRF).
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "send the key as application/json")
		return
	}
	if s.crossOrigin.Check(r) != nil {
		writeError(w, http.StatusForbidden, "sign-in from another origin is refused")
		return
	}
	var body struct {
		APIKey string `json:"api_key"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || body.APIKey == "" {
		writeError(w, http.StatusBadRequest, `send {"api_key": "<key>"} as JSON`)
		return
	}
	caller, err := s.store.AuthenticateAPIKey(r.Context(), body.APIKey)
	if errors.Is(err, models.ErrInvalidCredentials) {
		s.refusedCredentials(w, r, http.StatusUnauthorized, "invalid API key")
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "login", "error", err)
		writeError(w, http.StatusInternalServerError, "could not sign in")
		return
	}
	sess, token, err := s.store.CreateSession(r.Context(), caller.MembershipID, &caller.APIKeyID, s.sessionTTL)
	if err != nil {
		s.log.ErrorContext(r.Context(), "login", "error", err)
		writeError(w, http.StatusInternalServerError, "could not sign in")
		return
	}
	s.setSessionCookie(w, sess, token)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"session_id": sess.ID, "expires_at": sess.ExpiresAt.Format(time.RFC3339)}) //nolint:errcheck
}

// handleLogout ends the cookie's session; it answers 204 whether or not one was live. Another
// origin cannot sign a browser out (csrf.go).
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if s.crossOrigin.Check(r) != nil {
		writeError(w, http.StatusForbidden, csrfRefusal)
		return
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		if caller, err := s.store.AuthenticateSession(r.Context(), c.Value); err == nil {
			if err := s.store.DeleteSession(r.Context(), caller.SessionID); err != nil {
				s.log.ErrorContext(r.Context(), "logout", "error", err)
				writeError(w, http.StatusInternalServerError, "could not sign out")
				return
			}
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies})
	w.WriteHeader(http.StatusNoContent)
}
