// Package apitest checks real responses against the committed OpenAPI document (openapi.yaml at
// the repository root), so that the document cannot drift from what the server sends. Tests
// install a Checker's transport as the HTTP client's and report at the end of the run: every
// response to a documented operation must have a documented status and match its schema.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Checker validates responses and remembers what it saw.
type Checker struct {
	doc    *openapi3.T
	router routers.Router

	mu       sync.Mutex
	seen     map[string]int // operation id → responses checked
	failures []string
}

// DocumentPath is the committed document's path.
func DocumentPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "openapi.yaml")
}

func init() {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", decodeJSONLines)
	openapi3filter.RegisterBodyDecoder("text/event-stream", decodeEvents)
	openapi3filter.RegisterBodyDecoder("application/vnd.apache.parquet", openapi3filter.FileBodyDecoder)
}

// decodeEvents reads a server-sent events body (documented by the schema of one event's data):
// the events' data, one JSON value each, are checked as the lines of a JSON Lines body are
// (decodeJSONLines). Comment lines and fields other than data are skipped.
func decodeEvents(body io.Reader, h http.Header, schema *openapi3.SchemaRef, enc openapi3filter.EncodingFn) (any, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var values bytes.Buffer
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			values.WriteString(strings.TrimPrefix(data, " ") + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return decodeJSONLines(&values, h, schema, enc)
}

// decodeJSONLines reads a JSON Lines body (a stream of one object a line, documented by the
// schema of one line): every line is checked against the schema here, and the last is handed
// back for the validator to check as the body.
func decodeJSONLines(body io.Reader, _ http.Header, schema *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	dec := json.NewDecoder(body)
	dec.UseNumber()
	var last any
	for n := 0; ; n++ {
		var line any
		if err := dec.Decode(&line); err == io.EOF {
			return last, nil
		} else if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if schema != nil && schema.Value != nil {
			if err := schema.Value.VisitJSON(normalize(line)); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		last = line
	}
}

// normalize turns json.Numbers into float64s, as VisitJSON expects numbers.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}

// New loads and validates the committed document.
func New() (*Checker, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(DocumentPath())
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is not a valid document: %w", err)
	}
	// Match paths on any host: the document's one server is relative ("/").
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.yaml: %w", err)
	}
	return &Checker{doc: doc, router: router, seen: map[string]int{}}, nil
}

// Transport wraps next: each response to a documented operation is checked as it arrives (its
// body is read and handed back unchanged).
func (c *Checker) Transport(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		res, err := next.RoundTrip(req)
		if err != nil {
			return res, err
		}
		body, rerr := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if rerr == nil {
			c.Check(req, res.StatusCode, res.Header, body)
		}
		return res, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Check validates one response. A request no operation documents (the docs page, /auth, the
// blob store, an unknown path or method) is not checked.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) {
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	// A stream of no lines is a valid JSON Lines body; there is no line to check. Nor is one of events with no event yet (a stream cut off while it waited).
	if ct := header.Get("Content-Type"); len(bytes.TrimSpace(body)) == 0 && strings.HasPrefix(ct, "application/x-ndjson") ||
		strings.HasPrefix(ct, "text/event-stream") && !bytes.Contains(body, []byte("data:")) {
		in.Options.ExcludeResponseBody = true
	}
	verr := openapi3filter.ValidateResponse(context.Background(), in)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[route.Operation.OperationID]++
	if verr != nil {
		msg := verr.Error()
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		b := string(body)
		if len(b) > 500 {
			b = b[:500] + "…"
		}
		c.failures = append(c.failures, fmt.Sprintf("%s %s → %d (%s): %s\n  body: %s", req.Method, req.URL.Path, status, route.Operation.OperationID, msg, b))
	}
}

// Failures are the responses that broke the document.
func (c *Checker) Failures() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.failures)
}

// Coverage lists the operations checked and those never exercised.
func (c *Checker) Coverage() (checked, missed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			if c.seen[op.OperationID] > 0 {
				checked = append(checked, op.OperationID)
			} else {
				missed = append(missed, op.OperationID)
			}
		}
	}
	slices.Sort(checked)
	slices.Sort(missed)
	return checked, missed
}

// Install makes http.DefaultClient, which the suites' API clients use, check its responses, and
// returns the report to run after the tests: it prints the coverage and fails on any broken
// response. (http.DefaultTransport stays as it is: code clones it as an *http.Transport.)
func Install() (report func() error) {
	c, err := New()
	if err != nil {
		return func() error { return err }
	}
	http.DefaultClient.Transport = c.Transport(http.DefaultTransport)
	return c.Report
}

// Report prints what was checked and returns an error listing every broken response.
func (c *Checker) Report() error {
	checked, missed := c.Coverage()
	if os.Getenv("APITEST_VERBOSE") != "" || testingVerbose() {
		fmt.Fprintf(os.Stderr, "apitest: %d operations' responses checked against openapi.yaml; not exercised here: %s\n", len(checked), strings.Join(missed, ", "))
	}
	if f := c.Failures(); len(f) > 0 {
		return fmt.Errorf("apitest: %d responses break openapi.yaml:\n%s", len(f), strings.Join(f, "\n"))
	}
	return nil
}

func testingVerbose() bool {
	return slices.Contains(os.Args, "-test.v=true") || slices.Contains(os.Args, "-test.v")
}
