package httpapi

import (
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/proctorhq/proctor/models"
)

// role is the membership role an operation requires of its caller. Like authMode it is kept in
// the operation's metadata, stated where the route is registered (ownerOnly), and enforced by one
// middleware (requireRole): no handler checks a role itself. An operation that states none is
// open to every member of the team (its object rules, in models, still apply: a member changes
// their own comments, data files, secrets and personal credentials only).
//
// Which role each write operation needs, and why, is the table under "Roles" in README.md; a
// test holds the table and the operations' metadata equal.
type role string

const (
	// roleMember: any member of the team (the default).
	roleMember role = models.RoleMember
	// roleOwner: the team's owners only; a member gets 403.
	roleOwner role = models.RoleOwner
)

const (
	metaRole = "role"
	// extRole names, in the OpenAPI document, the role a write operation needs: owner or member.
	extRole = "x-proctor-role"
)

// ownerRefusal is the message of the 403 a member gets on an owner-only operation.
const ownerRefusal = "this operation needs the team's owner role; the caller is a member"

// ownerOnly marks o, as op built it, as the team owners' alone: it governs the whole team or
// other members' work (spending limits, environment variables, publishing, ...).
func ownerOnly(o huma.Operation) huma.Operation {
	if o.Metadata == nil {
		o.Metadata = map[string]any{}
	}
	o.Metadata[metaRole] = roleOwner
	o.Description = strings.TrimSpace(o.Description + " Owner only: a member of the team is refused with 403.")
	return o
}

// roleOf is the role an operation requires.
func roleOf(o *huma.Operation) role {
	if r, ok := o.Metadata[metaRole].(role); ok {
		return r
	}
	return roleMember
}

// isWrite reports whether an operation's method may change state.
func isWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// requireRole enforces each operation's role. It runs after authMiddleware, which put the
// caller in the context; an owner-only operation refuses any caller who is not an owner.
func (s *Server) requireRole(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if roleOf(ctx.Operation()) == roleOwner {
			if c := callerFrom(ctx.Context()); c == nil || c.Role != models.RoleOwner {
				huma.WriteErr(api, ctx, http.StatusForbidden, ownerRefusal) //nolint:errcheck
				return
			}
		}
		next(ctx)
	}
}

// documentRole states a write operation's role in the document (x-proctor-role), and, for an
// owner-only one, the 403 a member gets.
func documentRole(op *huma.Operation) {
	if !isWrite(op.Method) {
		return
	}
	r := roleOf(op)
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	op.Extensions[extRole] = string(r)
	if r != roleOwner {
		return
	}
	const why = "a caller who is not one of the team's owners"
	if res := op.Responses["403"]; res != nil {
		res.Description += "; also " + why
		return
	}
	if envelope := op.Responses["500"]; envelope != nil {
		op.Responses["403"] = &huma.Response{Description: http.StatusText(http.StatusForbidden) + ": " + why, Content: envelope.Content}
	}
}
