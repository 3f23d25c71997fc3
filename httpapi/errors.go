package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/proctorhq/proctor/models"
)

// ErrorBody is the envelope of every error response except 422, which keeps Huma's validation body
// so that clients see each failing field with its location.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo carries a machine-readable code and a human-readable message.
type ErrorInfo struct {
	Code    string `json:"code" doc:"Machine-readable error code" example:"not_found"`
	Message string `json:"message" doc:"Human-readable explanation" example:"taskset not found"`
}

// apiError is the huma.StatusError behind ErrorBody.
type apiError struct {
	status int
	ErrorBody
}

func (e *apiError) Error() string  { return e.ErrorBody.Error.Message }
func (e *apiError) GetStatus() int { return e.status }

// errorCode names each status for the envelope's code field.
func errorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	default:
		if status >= 500 {
			return "internal"
		}
		return strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
	}
}

func newAPIError(status int, msg string) *apiError {
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &apiError{status: status, ErrorBody: ErrorBody{Error: ErrorInfo{Code: errorCode(status), Message: msg}}}
}

// newHumaError replaces huma.NewError: Huma calls it for every error it produces (bad JSON, body too
// large, validation) and so do handlers through huma.ErrorXXX helpers.
//
// What comes back is bounded whatever was sent: at most maxDetails validation errors (the last
// one says how many were left out), values and messages cut to a few hundred bytes, so that a
// huge or hostile request is not reflected back.
func newHumaError(status int, msg string, errs ...error) huma.StatusError {
	if status == http.StatusUnprocessableEntity {
		details := make([]*huma.ErrorDetail, 0, min(len(errs), maxDetails+1))
		for i, e := range errs {
			if e == nil {
				continue
			}
			if len(details) == maxDetails {
				details = append(details, &huma.ErrorDetail{Message: fmt.Sprintf("and %d more errors", len(errs)-i)})
				break
			}
			var d huma.ErrorDetailer
			if errors.As(e, &d) {
				det := *d.ErrorDetail()
				det.Message, det.Location, det.Value = bound(det.Message), bound(det.Location), boundValue(det.Value)
				details = append(details, &det)
			} else {
				details = append(details, &huma.ErrorDetail{Message: bound(e.Error())})
			}
		}
		return &huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: bound(msg), Errors: details}
	}
	for _, e := range errs {
		if e == nil {
			continue
		}
		// A detail's own Error() formats its value, which Huma fills with the whole body of a
		// request it cannot parse: its message is enough, and costs nothing.
		why := e.Error
		var d huma.ErrorDetailer
		if errors.As(e, &d) {
			why = func() string { return d.ErrorDetail().Message }
		}
		if w := bound(why()); !strings.Contains(msg, w) {
			msg += ": " + w
		}
	}
	return newAPIError(status, bound(msg))
}

// Bounds of what an error echoes.
const (
	maxDetails = 50
	maxEcho    = 300
)

// bound cuts s to maxEcho bytes (on a rune boundary), saying how long it was.
func bound(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// boundValue keeps a small value as it is, cuts a long string, and summarizes a large array or
// object by its size.
func boundValue(v any) any {
	switch x := v.(type) {
	case nil, bool, float64, int, int64:
		return v
	case string:
		return bound(x)
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) <= maxEcho {
		return v
	}
	switch x := v.(type) {
	case []any:
		return fmt.Sprintf("(an array of %d items)", len(x))
	case map[string]any:
		return fmt.Sprintf("(an object of %d keys)", len(x))
	}
	return fmt.Sprintf("(a value of %d bytes)", len(b))
}

// newHumaErrorWithContext is what Huma calls for an error a handler returns that is no
// StatusError (a failed query, a broken connection): a 500. Its cause is logged with the request
// id and never sent; the client gets the request id to quote.
func newHumaErrorWithContext(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
	if status < http.StatusInternalServerError {
		return newHumaError(status, msg, errs...)
	}
	ctx := hctx.Context()
	id := requestIDFrom(ctx)
	loggerFrom(ctx).ErrorContext(ctx, "internal error", "request_id", id, "method", hctx.Method(), "path", hctx.URL().Path,
		"error", errors.Join(errs...))
	return newAPIError(status, "internal error (request id "+id+")")
}

func init() {
	// Huma's error constructors are package state by design; this package is their only user
	// and sets them once, before any API is built.
	huma.NewError = newHumaError
	huma.NewErrorWithContext = newHumaErrorWithContext
}

// storeError maps the store's sentinel errors to API errors; anything else is a 500 whose detail
// stays in the log. The fields of a validation error came from the request's body.
func storeError(err error, what string) error {
	return storeErrorIn(err, "body", what)
}

// storeErrorIn is storeError for a store call whose input came from the request's part in
// ("query", "path"), which locates the fields of a validation error.
func storeErrorIn(err error, in, what string) error {
	var verr models.ValidationError
	switch {
	case errors.As(err, &verr):
		details := make([]error, len(verr))
		for i, e := range verr {
			details[i] = fieldDetail(in, e)
		}
		return newHumaError(http.StatusUnprocessableEntity, "validation failed", details...)
	case errors.Is(err, models.ErrForbidden):
		return newAPIError(http.StatusForbidden, err.Error())
	case errors.Is(err, models.ErrNotFound):
		return newAPIError(http.StatusNotFound, what+" not found")
	case errors.Is(err, models.ErrConflict):
		return newAPIError(http.StatusConflict, err.Error())
	default:
		return err
	}
}

// writeError writes the envelope from plain chi handlers and middleware.
func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(newAPIError(status, msg).ErrorBody) //nolint:errcheck // the client went away
}

// fieldDetail locates a store's invalid field in the request: its path under the part in.
func fieldDetail(in string, e models.FieldError) *huma.ErrorDetail {
	loc := in
	switch {
	case e.Location == "":
	case strings.HasPrefix(e.Location, "["):
		loc += e.Location
	default:
		loc += "." + e.Location
	}
	return &huma.ErrorDetail{Location: loc, Message: e.Message, Value: e.Value}
}

// validation builds a 422 for a rule the schema cannot express.
func validation(location, msg string, value any) error {
	return newHumaError(http.StatusUnprocessableEntity, "validation failed", &huma.ErrorDetail{Location: location, Message: msg, Value: value})
}
