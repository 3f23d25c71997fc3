package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"golang.org/x/sync/semaphore"
)

// Request bodies are read by one Huma middleware, readBody, that runs after authentication (and
// the role check): a request the API refuses for its credentials costs no read of its body, and
// no memory. Only then is the body read, within three bounds:
//
//   - its size: a declared Content-Length past the operation's MaxBodyBytes is refused 413 before
//     a byte is read, and a body that grows past it while read is refused too;
//   - memory: the bodies buffered at once hold at most BodyBytesInFlight bytes between them (a
//     body weighs twice its declared length, or the operation's limit when it declares none: it
//     is held here and in Huma's copy), and one caller's bodies at most half of that, so that a
//     member sending large bodies slowly cannot hold them all; a request that finds no room
//     waits up to BodyWait for it, then gets 503 with Retry-After;
//   - time: a body must arrive at BodyMinRate bytes a second on average after a grace of
//     BodyGrace (the rule of Kestrel's MinRequestBodyDataRate), else 408. It is enforced as a read
//     deadline that each read moves to start + grace + bytes so far / rate, so a slow body is
//     cut off where its rate drops below the bound, not at a fixed time whatever its size.
//
// The JSON of a body is then scanned for what no handler should see (control characters escaped
// in strings, nesting past maxJSONDepth: control.go, jsondepth.go), and the operation reads the
// buffered bytes. An operation that streams its body instead (metaStreamBody: a form upload)
// gets the connection's reader under the same rate bound, and buffers nothing; at most
// BodyStreams such bodies are received at once (each spills up to its size to a temporary file,
// and costs the CPU of its bytes), one caller's at most half of them, past which a request
// waits up to BodyWait, then gets 503.
//
// Once the body is read, the read deadline is lifted and Huma's own (its BodyReadTimeout) is
// not set: net/http keeps a read pending on an idle connection to notice the client going away,
// and a deadline passing under it would cancel the request's context while the handler works
// (the cause of a 50,000-task upload answering 500; tasks_test.go).
//
// Whatever answers a request before its body is read to the end closes the connection after the
// answer (closeUnreadBodies), instead of net/http reading up to 256 KiB more of it first.

// metaStreamBody in an operation's metadata says its handler reads a multipart/form-data body as
// a stream (bodyStream); readBody buffers it only when it is of another type. Such an operation
// declares no request body to Huma when it registers (Huma would read it whole first), and
// documents it after.
const metaStreamBody = "stream_body"

// bodyLimits are readBody's bounds (Options: BodyBytesInFlight, BodyStreams, BodyWait,
// BodyMinRate, BodyGrace).
type bodyLimits struct {
	// bytes bounds the buffered bodies' bytes, streams the streamed bodies.
	bytes, streams *sharedLimit
	minRate        int64 // bytes a second
	grace          time.Duration
}

func newBodyLimits(o Options) bodyLimits {
	return bodyLimits{
		bytes:   newSharedLimit(o.BodyBytesInFlight, o.BodyWait),
		streams: newSharedLimit(int64(o.BodyStreams), o.BodyWait),
		minRate: o.BodyMinRate, grace: o.BodyGrace,
	}
}

// readBody is the Huma middleware that reads request bodies (see above).
func (s *Server) readBody(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		r, _ := humachi.Unwrap(ctx)
		stream, _ := op.Metadata[metaStreamBody].(bool)
		if (op.RequestBody == nil && !stream) || r == nil {
			next(ctx)
			return
		}
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			// Nothing to read, and no read deadline for Huma to set and leave behind.
			next(bodyContext{humaContext: ctx, body: http.NoBody})
			return
		}
		limit := op.MaxBodyBytes
		if limit <= 0 {
			limit = s.maxBodyBytes
		}
		if r.ContentLength > limit {
			huma.WriteErr(api, ctx, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is %d bytes; this operation takes at most %d", r.ContentLength, limit)) //nolint:errcheck
			return
		}
		body := &minRateReader{r: ctx.BodyReader(), setDeadline: ctx.SetReadDeadline, start: time.Now(), grace: s.bodies.grace, rate: s.bodies.minRate}
		if stream && isForm(ctx.Header("Content-Type")) {
			body.limit = limit
			release, err := s.bodies.streams.take(ctx.Context(), callerKeyOf(ctx.Context()), 1)
			if err != nil {
				refuseBody(ctx, err, "the server is receiving as many uploads as it takes at once; retry shortly",
					"you are sending as many uploads at once as one caller may; retry when one has arrived")
				return
			}
			defer release()
			body.startNow()
			next(bodyContext{humaContext: ctx, body: body})
			body.lift()
			return
		}
		if stream {
			// A streaming operation's other bodies are small JSON requests.
			limit = min(limit, maxUploadRequest)
		}
		// The body is held twice: read here, and copied by Huma into the input it decodes.
		weight := limit
		if r.ContentLength > 0 {
			weight = r.ContentLength
		}
		weight = min(2*weight, s.bodies.bytes.capacity)
		release, err := s.bodies.bytes.take(ctx.Context(), callerKeyOf(ctx.Context()), weight)
		if err != nil {
			refuseBody(ctx, err, "the server is reading as many request bodies as it holds at once; retry shortly",
				"you are sending as many large request bodies at once as one caller may; retry when one has arrived")
			return
		}
		defer release()
		body.startNow()
		buf, status, msg := readAllWithin(body, r.ContentLength, limit)
		body.lift()
		if status != 0 {
			huma.WriteErr(api, ctx, status, msg) //nolint:errcheck
			return
		}
		if strings.Contains(ctx.Header("Content-Type"), "json") {
			if detail := jsonRefusal(buf); detail != nil {
				huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed", detail) //nolint:errcheck
				return
			}
			// Huma would copy a body it cannot parse into its error, twice.
			var syntax *json.SyntaxError
			if err := json.Unmarshal(buf, &struct{}{}); errors.As(err, &syntax) || (err != nil && len(bytes.TrimSpace(buf)) == 0) {
				huma.WriteErr(api, ctx, http.StatusBadRequest, "the body is not well-formed JSON: "+bound(err.Error())) //nolint:errcheck
				return
			}
		}
		next(bodyContext{humaContext: ctx, body: &dropAtEOF{b: buf}})
	}
}

// writeHumaError writes e as it is: huma.WriteErr hides the message of any 5xx, as an internal
// error's, but this one says what the client can do.
func writeHumaError(ctx huma.Context, e *apiError) {
	ctx.SetHeader("Content-Type", "application/json")
	ctx.SetStatus(e.status)
	json.NewEncoder(ctx.BodyWriter()).Encode(e.ErrorBody) //nolint:errcheck // the client went away
}

// sharedLimit bounds something read at once (the bytes of the buffered bodies, the streamed
// bodies), and each caller to half of it (at least one unit), so that a member who sends large
// bodies slowly (each within the minimum rate) leaves the other half to everyone else. A request
// that finds no room waits up to wait for it.
type sharedLimit struct {
	all      *semaphore.Weighted
	capacity int64
	wait     time.Duration

	mu    sync.Mutex
	byKey map[string]*callerShare // each caller's share, while one of its requests holds or waits
}

type callerShare struct {
	*semaphore.Weighted
	users int
}

func newSharedLimit(capacity int64, wait time.Duration) *sharedLimit {
	return &sharedLimit{all: semaphore.NewWeighted(capacity), capacity: capacity, wait: wait, byKey: map[string]*callerShare{}}
}

// share is how much one caller may hold.
func (l *sharedLimit) share() int64 { return max(1, l.capacity/2) }

// Why a sharedLimit refused: the caller holds its half, or everything is taken.
var (
	errCallerShare = errors.New("the caller holds its share")
	errAllTaken    = errors.New("everything is taken")
)

// take takes weight units for caller, waiting up to the bound for them, and answers how to give
// them back; errCallerShare or errAllTaken when none came in time.
func (l *sharedLimit) take(ctx context.Context, caller string, weight int64) (func(), error) {
	ctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	share := l.shareOf(caller)
	own := min(weight, l.share())
	if err := share.Acquire(ctx, own); err != nil {
		l.done(caller)
		return nil, errCallerShare
	}
	if err := l.all.Acquire(ctx, weight); err != nil {
		share.Release(own)
		l.done(caller)
		return nil, errAllTaken
	}
	return func() {
		l.all.Release(weight)
		share.Release(own)
		l.done(caller)
	}, nil
}

// shareOf is caller's share, held by one more request until done.
func (l *sharedLimit) shareOf(caller string) *semaphore.Weighted {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.byKey[caller]
	if sh == nil {
		sh = &callerShare{Weighted: semaphore.NewWeighted(l.share())}
		l.byKey[caller] = sh
	}
	sh.users++
	return sh.Weighted
}

// done lets go of caller's share for one request; a share no request holds is forgotten.
func (l *sharedLimit) done(caller string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sh := l.byKey[caller]; sh != nil {
		if sh.users--; sh.users <= 0 {
			delete(l.byKey, caller)
		}
	}
}

// refuseBody answers a request whose body found no room: full when everything is taken, mine
// when the caller holds its share.
func refuseBody(ctx huma.Context, err error, full, mine string) {
	msg := full
	if errors.Is(err, errCallerShare) {
		msg = mine
	}
	ctx.SetHeader("Retry-After", "1")
	writeHumaError(ctx, newAPIError(http.StatusServiceUnavailable, msg))
}

// callerKeyOf names the caller whose body is read: its membership (a key and a session of one
// member share it); anonymous callers share one.
func callerKeyOf(ctx context.Context) string {
	if c := callerFrom(ctx); c != nil {
		return strconv.FormatInt(c.MembershipID, 10)
	}
	return "anonymous"
}

// readAllWithin reads a body of declared length (-1: unknown) up to limit bytes: it answers the
// bytes, or the status and message of why they could not be read.
func readAllWithin(r io.Reader, declared, limit int64) ([]byte, int, string) {
	var buf bytes.Buffer
	if declared > 0 {
		// ReadFrom keeps MinRead bytes free for the read that finds the end.
		buf.Grow(int(declared) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	var ne net.Error
	switch {
	case n > limit:
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over %d bytes, the most this operation takes", limit)
	case errors.As(err, &ne) && ne.Timeout():
		return nil, http.StatusRequestTimeout, slowBody
	case err != nil:
		return nil, http.StatusBadRequest, "could not read the request body"
	}
	return buf.Bytes(), 0, ""
}

// jsonRefusal is why a JSON body is refused before any handler reads it, or nil.
func jsonRefusal(b []byte) *huma.ErrorDetail {
	if off, code := jsonControlEscape(b); off >= 0 {
		return &huma.ErrorDetail{Location: "body", Message: fmt.Sprintf("control character U+%04X (escaped at byte %d) is not allowed", code, off)}
	}
	if loc := jsonTooDeep(b, maxJSONDepth); loc != "" {
		return &huma.ErrorDetail{Location: bound(loc), Message: fmt.Sprintf("objects and arrays nest deeper than %d levels (the body being the first)", maxJSONDepth)}
	}
	return nil
}

// isForm says whether a Content-Type is multipart/form-data.
func isForm(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "multipart/form-data"
}

// minRateReader reads a request body within a read deadline that it moves before each read to
// start + grace + read/rate: the body must keep to rate bytes a second on average after grace.
// With a limit, a body that grows past it fails with errBodyTooLarge (a streamed body's bound).
type minRateReader struct {
	r           io.Reader
	setDeadline func(time.Time) error
	start       time.Time
	grace       time.Duration
	rate        int64
	read        int64
	limit       int64 // 0: none
}

// errBodyTooLarge is what a streamed body's reader fails with past the operation's limit.
var errBodyTooLarge = errors.New("the request body is larger than this operation takes")

func (m *minRateReader) Read(p []byte) (int, error) {
	if m.r == nil {
		return 0, io.EOF
	}
	if m.limit > 0 && m.read > m.limit {
		return 0, errBodyTooLarge
	}
	due := m.start.Add(m.grace + time.Duration(float64(m.read)/float64(m.rate)*float64(time.Second)))
	m.setDeadline(due) //nolint:errcheck // a connection without deadlines is bounded by the server's ReadTimeout
	n, err := m.r.Read(p)
	m.read += int64(n)
	if m.limit > 0 && m.read > m.limit {
		return n, errBodyTooLarge
	}
	if err == io.EOF {
		// net/http now keeps a read pending to notice the client going away: a deadline left
		// under it would cancel the request while its handler works.
		m.lift()
	}
	return n, err
}

// bodyError is the answer to a streamed body that could not be read, by why.
func bodyError(err error, what string) error {
	var ne net.Error
	switch {
	case errors.Is(err, errBodyTooLarge):
		return newAPIError(http.StatusRequestEntityTooLarge, errBodyTooLarge.Error())
	case errors.As(err, &ne) && ne.Timeout():
		return newAPIError(http.StatusRequestTimeout, slowBody)
	}
	return newAPIError(http.StatusBadRequest, what+": "+bound(err.Error()))
}

const slowBody = "the request body arrived too slowly: after a few seconds' grace it must keep to a minimum rate"

// startNow starts the body's clock: when the server begins to read it, not when the request
// arrived. A request that waited for its turn (the budget of bodies read at once) was kept waiting
// by the server, not by a slow client, and is not refused as slow for it.
func (m *minRateReader) startNow() { m.start = time.Now() }

// lift ends the read deadline once the body is read (see above).
func (m *minRateReader) lift() { m.setDeadline(time.Time{}) } //nolint:errcheck

// bodyContext is the context an operation sees once readBody has its body: the bytes read, or
// the connection's reader under the rate bound for a streamed body; and no read deadline to set
// (Huma sets its BodyReadTimeout before it reads, and readBody keeps the deadlines).
type bodyContext struct {
	humaContext
	body io.Reader
}

// Unwrap gives humachi.Unwrap the adapter's context beneath.
func (c bodyContext) Unwrap() huma.Context { return c.humaContext }

func (c bodyContext) BodyReader() io.Reader { return c.body }

func (c bodyContext) SetReadDeadline(time.Time) error { return nil }

// dropAtEOF reads bytes and lets go of them at their end: Huma keeps its own copy while the
// operation runs.
type dropAtEOF struct{ b []byte }

func (d *dropAtEOF) Read(p []byte) (int, error) {
	if len(d.b) == 0 {
		d.b = nil
		return 0, io.EOF
	}
	n := copy(p, d.b)
	d.b = d.b[n:]
	return n, nil
}

// humaContext is huma.Context under a name that does not clash, as an embedded field, with its
// own Context method.
type humaContext huma.Context

// closeUnreadBodies closes the connection after an answer given before the request's body was
// read to its end (a 401, 404, 413 …): net/http would otherwise read up to 256 KiB more of it,
// for as long as the client takes, to reuse the connection.
func closeUnreadBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		body := &eofBody{ReadCloser: r.Body}
		// A shallow copy: the server's own request keeps its body, whose type it checks.
		r = r.WithContext(r.Context())
		r.Body = body
		next.ServeHTTP(&closeIfUnread{ResponseWriter: w, body: body}, r)
	})
}

// eofBody notes whether a body was read to its end.
type eofBody struct {
	io.ReadCloser
	eof bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// closeIfUnread asks for the connection to close when the answer starts before body's end.
type closeIfUnread struct {
	http.ResponseWriter
	body    *eofBody
	written bool
}

func (w *closeIfUnread) WriteHeader(code int) {
	if !w.written && !w.body.eof {
		w.Header().Set("Connection", "close")
	}
	w.written = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeIfUnread) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the writer beneath (read deadlines, flushing).
func (w *closeIfUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }
