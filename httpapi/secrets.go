package httpapi

import "net/http"

// The secret stores (spec: Environment variables, Member secrets, Provider credentials). Values
// are sealed with the server's secrets key as they arrive; answers carry masked_value (see
// secrets.Mask), and value only in the answer to the request that set it.

// requireSecrets refuses, with 503, what needs a secrets key on a server without one.
func (s *Server) requireSecrets() error {
	if s.secrets == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server has no secrets key configured (PROCTOR_SECRETS_KEY_FILE), so it stores no secrets")
	}
	return nil
}
