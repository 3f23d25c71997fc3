package httpapi

import (
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

// codecHandler serves the Temporal payload codec (POST /codec/encode and /codec/decode, the
// protocol of the SDK's codec server) so that the Temporal Web UI can show the encrypted
// payloads of workflow histories. Only a team owner's API key or session may use it, and a
// browser only from the UI's origin (codecOrigin).
func (s *Server) codecHandler(codecOrigin string) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(ptemporal.Codec{Keys: s.secrets})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" {
			if codecOrigin == "" || !strings.EqualFold(origin, codecOrigin) {
				writeError(w, http.StatusForbidden, "the codec answers browsers from the Temporal Web UI's origin only")
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Credentials", "true")
			w.Header().Set("Vary", "Origin")
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "POST")
				w.Header().Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeError(w, http.StatusMethodNotAllowed, "the codec takes POST")
			return
		}
		cookie := ""
		if c, err := r.Cookie(SessionCookie); err == nil {
			cookie = c.Value
		}
		caller, fail := s.resolveCaller(r.Context(), r.Header.Get("Authorization"), cookie, r.RemoteAddr)
		switch {
		case fail != nil:
			writeAuthFailure(w, fail)
			return
		case caller == nil:
			writeError(w, http.StatusUnauthorized, "missing credentials: sign in (POST /auth/session) or send an API key")
			return
		case caller.Role != models.RoleOwner:
			writeError(w, http.StatusForbidden, "only a team owner may decode workflow payloads")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4<<20)
		codec.ServeHTTP(w, r)
	})
}
