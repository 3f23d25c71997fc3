package httpapi

import (
	"io"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// liftReadDeadline lifts the connection's read deadline once an operation has read its request
// body to the end, as net/http itself does when a handler reaches the end of a body: from then on
// net/http keeps a read pending to notice the client going away, and a deadline that passes under
// it fails that read and cancels the request's context, and the connection's.
//
// Huma bounds the reading of a body with a read deadline (an operation's BodyReadTimeout, 5 s
// unless set), but rejectControlChars (control.go) reads JSON bodies ahead, so Huma set its
// deadline after net/http had lifted its own, and left it: an upload of 50,000 tasks answered
// 500 (context canceled) 5 s in, and every later request on its keep-alive connection failed at
// once. Lifting it where Huma's read ends restores net/http's rule whoever reads first. A slow
// body stays bounded while it is read (the server's ReadTimeout, then Huma's deadline); the time
// an operation takes after that is not the client's to bound.
func liftReadDeadline(ctx huma.Context, next func(huma.Context)) {
	next(bodyReadContext{ctx})
}

// humaContext is huma.Context under a name that does not clash, as an embedded field, with its
// own Context method.
type humaContext huma.Context

type bodyReadContext struct{ humaContext }

// Unwrap gives humachi.Unwrap the adapter's context beneath.
func (c bodyReadContext) Unwrap() huma.Context { return c.humaContext }

func (c bodyReadContext) BodyReader() io.Reader {
	r := c.humaContext.BodyReader()
	if r == nil {
		return nil
	}
	return &liftAtEOF{r: r, lift: c.lift}
}

func (c bodyReadContext) lift() {
	c.humaContext.SetReadDeadline(time.Time{}) //nolint:errcheck // a writer without deadlines has none to lift
}

// liftAtEOF reads a body and lifts the read deadline when the body ends.
type liftAtEOF struct {
	r    io.Reader
	lift func()
}

func (l *liftAtEOF) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err == io.EOF {
		l.lift()
	}
	return n, err
}

// Close closes the body beneath, as Huma does with the reader it is given.
func (l *liftAtEOF) Close() error {
	if c, ok := l.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
