package blob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// handlerPrefix is the path the API server mounts Handler at.
const handlerPrefix = "/blob/"

// SignedURL returns <PublicBaseURL>/blob/<key>?expires=<unix>&method=<M>&sig=<hex>,
// where sig is hex(HMAC-SHA256(SigningKey, method + "\n" + key + "\n" + expires)).
// Handler verifies it.
func (b *LocalBucket) SignedURL(ctx context.Context, key string, method string, expires time.Duration) (string, error) {
	m, err := checkSignRequest(key, method, expires)
	if err != nil {
		return "", err
	}
	if b.baseURL == "" || len(b.signingKey) == 0 {
		return "", errors.New("blob: local signed URLs need Options.PublicBaseURL and Options.SigningKey")
	}
	exp := time.Now().Add(expires).Unix()
	q := url.Values{
		"method":  {m},
		"expires": {strconv.FormatInt(exp, 10)},
		"sig":     {hex.EncodeToString(b.sign(m, key, exp))},
	}
	return b.baseURL + handlerPrefix + escapeKey(key) + "?" + q.Encode(), nil
}

func (b *LocalBucket) sign(method, key string, expires int64) []byte {
	mac := hmac.New(sha256.New, b.signingKey)
	mac.Write([]byte(method + "\n" + key + "\n" + strconv.FormatInt(expires, 10)))
	return mac.Sum(nil)
}

// escapeKey escapes each segment but keeps the slashes, so URLs stay
// readable and map back to the key by plain path decoding.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// Handler serves the URLs made by SignedURL. Mount it at /blob/ without
// stripping the prefix:
//
//	mux.Handle("/blob/", bucket.Handler())
//
// It needs no other authentication: the signature is the credential.
func (b *LocalBucket) Handler() http.Handler {
	return http.HandlerFunc(b.serveHTTP)
}

func (b *LocalBucket) serveHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, handlerPrefix)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such blob route")
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut:
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "signed blob URLs support GET and PUT only")
		return
	}
	if msg := b.verify(r, key); msg != "" {
		writeError(w, http.StatusForbidden, "forbidden", msg)
		return
	}
	if r.Method == http.MethodPut {
		b.servePut(w, r, key)
		return
	}
	b.serveGet(w, r, key)
}

// verify returns why the request's signature is unacceptable, or "" if it
// is fine. The messages are safe to show: they reveal nothing about the key.
func (b *LocalBucket) verify(r *http.Request, key string) string {
	if len(b.signingKey) == 0 {
		return "signed URLs are not enabled on this server"
	}
	q := r.URL.Query()
	signedMethod := q.Get("method")
	exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	if err != nil {
		return "malformed signed URL: bad expires"
	}
	got, err := hex.DecodeString(q.Get("sig"))
	if err != nil || len(got) == 0 {
		return "malformed signed URL: bad sig"
	}
	if !hmac.Equal(got, b.sign(signedMethod, key, exp)) {
		return "signature does not match"
	}
	if time.Now().Unix() > exp {
		return "signed URL has expired"
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if method != signedMethod {
		return fmt.Sprintf("URL is signed for %s, not %s", signedMethod, method)
	}
	return ""
}

func (b *LocalBucket) serveGet(w http.ResponseWriter, r *http.Request, key string) {
	f, attrs, err := b.open(key)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no such object")
		return
	}
	if err != nil {
		slog.ErrorContext(r.Context(), "blob: serving signed GET", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "could not read object")
		return
	}
	defer f.Close()
	if attrs.ContentType == RetiredContentType {
		// A retired key holds no bytes anyone uploaded (see Retire): gone, for a reader.
		writeError(w, http.StatusNotFound, "not_found", "no such object")
		return
	}
	h := w.Header()
	h.Set("Content-Type", attrs.ContentType)
	// The content type is whatever the uploader claimed, and these URLs are
	// served from the API's own origin (GCS serves from its own domain).
	// Without this an uploaded text/html object could run script as the API
	// origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	// ServeContent handles HEAD, Range and If-Modified-Since for us.
	http.ServeContent(w, r, "", attrs.Updated, f)
}

func (b *LocalBucket) servePut(w http.ResponseWriter, r *http.Request, key string) {
	if r.ContentLength > b.maxUpload {
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("object exceeds the %d byte upload limit", b.maxUpload))
		return
	}
	body := http.MaxBytesReader(w, r.Body, b.maxUpload)
	// Create-only: a signed PUT URL writes once, so what the server checked
	// after the upload stays what is served.
	err := b.create(r.Context(), key, body, r.Header.Get("Content-Type"))
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, ErrExists):
		writeError(w, http.StatusPreconditionFailed, "precondition_failed",
			"an object is already stored here: an upload URL writes once")
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("object exceeds the %d byte upload limit", b.maxUpload))
	case err != nil:
		slog.ErrorContext(r.Context(), "blob: serving signed PUT", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "could not store object")
	default:
		w.WriteHeader(http.StatusOK)
	}
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError uses the same envelope as the rest of the API so clients need
// one error decoder.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: code, Message: message}})
}
