package httpapi

import (
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// allowUnknownRequestFields makes every object a request body can hold accept keys it does not
// name, so that a client of a newer or older version sending one more field is not refused:
// those keys are ignored, while the named ones keep their types and bounds. Responses keep
// additionalProperties false, so the document says exactly what the server sends, unless a
// schema is shared with a request.
func allowUnknownRequestFields(o *huma.OpenAPI) {
	var bodies []*huma.Schema
	for _, item := range o.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op == nil || op.RequestBody == nil {
				continue
			}
			for _, mt := range op.RequestBody.Content {
				bodies = append(bodies, mt.Schema)
			}
		}
	}
	walkSchemas(o.Components.Schemas, bodies, func(sc *huma.Schema) {
		if addl, ok := sc.AdditionalProperties.(bool); ok && !addl && sc.Type == huma.TypeObject {
			sc.AdditionalProperties = true
		}
	})
}

// walkSchemas calls visit once for every schema reachable from roots (references followed
// through reg), before walking into its properties, items, additional properties and
// alternatives, as visit left them.
func walkSchemas(reg huma.Registry, roots []*huma.Schema, visit func(*huma.Schema)) {
	seen := map[*huma.Schema]bool{}
	var walk func(sc *huma.Schema)
	walk = func(sc *huma.Schema) {
		if sc == nil || seen[sc] {
			return
		}
		seen[sc] = true
		if sc.Ref != "" {
			walk(reg.SchemaFromRef(sc.Ref))
			return
		}
		visit(sc)
		for _, p := range sc.Properties {
			walk(p)
		}
		walk(sc.Items)
		if addl, ok := sc.AdditionalProperties.(*huma.Schema); ok {
			walk(addl)
		}
		for _, group := range [][]*huma.Schema{sc.OneOf, sc.AnyOf, sc.AllOf} {
			for _, sub := range group {
				walk(sub)
			}
		}
	}
	for _, sc := range roots {
		walk(sc)
	}
}

// nullablePointers documents as nullable every pointer field that is sent as null when unset
// (one without omitempty). Huma does so for most pointers, but not for those whose type provides
// its own schema (uuid.UUID), nor for pointers to objects.
func nullablePointers(o *huma.OpenAPI) {
	reg := o.Components.Schemas
	for name, sc := range reg.Map() {
		t := reg.TypeFromRef("#/components/schemas/" + name)
		if t == nil || t.Kind() != reflect.Struct {
			continue
		}
		for f := range structFields(t) {
			tag := f.Tag.Get("json")
			jsonName, opts, _ := strings.Cut(tag, ",")
			if f.Type.Kind() != reflect.Pointer || jsonName == "" || jsonName == "-" || strings.Contains(opts, "omitempty") {
				continue
			}
			prop := sc.Properties[jsonName]
			switch {
			case prop == nil || prop.Nullable:
			case prop.Ref != "":
				sc.Properties[jsonName] = &huma.Schema{Description: prop.Description,
					AnyOf: []*huma.Schema{{Ref: prop.Ref}, {Type: "null"}}}
			default:
				prop.Nullable = true
			}
		}
	}
}

// freeFormMaps writes the values of a free-form object (map[string]any) as additionalProperties:
// true rather than the empty schema {}: the same in JSON Schema, but validators that read {} as
// "not null" (kin-openapi's) would refuse a null value, which such maps may hold.
func freeFormMaps(o *huma.OpenAPI) {
	reg := o.Components.Schemas
	walkSchemas(reg, slices.Collect(maps.Values(reg.Map())), func(sc *huma.Schema) {
		addl, ok := sc.AdditionalProperties.(*huma.Schema)
		if ok && addl.Type == "" && addl.Ref == "" && len(addl.Properties) == 0 && addl.Items == nil && len(addl.OneOf)+len(addl.AnyOf)+len(addl.AllOf) == 0 {
			sc.AdditionalProperties = true
		}
	})
}

// structFields yields t's fields, those of embedded structs in their place.
func structFields(t reflect.Type) func(func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
				for g := range structFields(f.Type) {
					if !yield(g) {
						return
					}
				}
				continue
			}
			if f.IsExported() && !yield(f) {
				return
			}
		}
	}
}

func apiConfig() huma.Config {
	cfg := huma.DefaultConfig("Proctor API", APIVersion)
	cfg.Info.Description = "The REST API of Proctor, a self-hostable evaluation platform for AI agents. " +
		"Every public route is under /v2. Authenticate with an API key: `Authorization: Bearer <key>`. " +
		"Errors use the envelope `{\"error\": {\"code\", \"message\"}}`; validation failures (422) list each failing field. " +
		"Request bodies ignore keys they do not name, so clients of other versions keep working; named keys are checked. " +
		"A request body nests objects and arrays at most " + strconv.Itoa(maxJSONDepth) + " levels deep, the body being the first, " +
		"open objects such as request_defaults, args and metrics included: deeper is a 422 at the first value too deep. " +
		"Each write operation states in x-proctor-role who may call it: member (any member of the team) or owner " +
		"(the team's owners only; a member is refused with 403)."
	// The reference page is served offline by this package, not from Huma's CDN-backed renderer,
	// and responses carry no $schema links: bodies are exactly the spec's shapes.
	// Relative: the document describes whichever host serves it.
	cfg.Servers = []*huma.Server{{URL: "/", Description: "The Proctor instance serving this document"}}
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.CreateHooks = nil
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer":    {Type: "http", Scheme: "bearer", Description: "A team API key, shown once when it is created (`proctor admin key create`)."},
		"x-api-key": {Type: "apiKey", In: "header", Name: "x-api-key", Description: "A team API key sent as the Anthropic SDKs send theirs (the gateway's Anthropic endpoint only)."},
		"session": {Type: "apiKey", In: "cookie", Name: SessionCookie,
			Description: "A signed-in browser session; `POST /auth/session` with `{\"api_key\"}` sets it. " +
				"A request with it and any method but GET, HEAD and OPTIONS must come from this server's own origin " +
				"(by the browser's `Sec-Fetch-Site`, else `Origin` against `Host`): from another origin it is refused with 403."},
	}
	registry := cfg.Components.Schemas
	// uuid.UUID is a byte array that marshals as text; document and validate it as what clients
	// send, a string in uuid format, so that a malformed id is a 422 at its location.
	registry.RegisterTypeAlias(reflect.TypeFor[uuid.UUID](), reflect.TypeFor[uuidString]())
	cfg.OnAddOperation = append(cfg.OnAddOperation, func(_ *huma.OpenAPI, op *huma.Operation) {
		// Every error response carries the envelope except 422, which keeps the validation body.
		if r := op.Responses["422"]; r != nil {
			schema := registry.Schema(reflect.TypeOf(huma.ErrorModel{}), true, "ErrorModel")
			r.Content = map[string]*huma.MediaType{"application/problem+json": {Schema: schema}}
		}
		documentTransportErrors(op)
		documentRole(op)
	})
	documentMethodNotAllowed(&cfg)
	cfg.Transformers = append(cfg.Transformers, newNilSlices().transform)
	return cfg
}

// documentTransportErrors adds the error statuses any operation of its kind can answer before
// its handler runs: for a body, 400 (not JSON), 408 (not received in time), 413 (too large),
// 415 (not JSON by its type) and 503 (no room to read it: bodygate.go); 429 where credentials are read (failed authentication throttled);
// 403 for a state-changing method where the session cookie is accepted (a cross-site request,
// csrf.go); and 431, which Go's HTTP server answers in plain text for oversized headers.
func documentTransportErrors(op *huma.Operation) {
	envelope := op.Responses["500"]
	if envelope == nil {
		return
	}
	add := func(status int, why string) {
		code := strconv.Itoa(status)
		if op.Responses[code] == nil {
			op.Responses[code] = &huma.Response{Description: http.StatusText(status) + ": " + why, Content: envelope.Content}
		}
	}
	if stream, _ := op.Metadata[metaStreamBody].(bool); op.RequestBody != nil || stream {
		add(http.StatusBadRequest, "the body is not well-formed JSON")
		add(http.StatusRequestTimeout, "the body did not arrive in time")
		add(http.StatusRequestEntityTooLarge, "the body is over the operation's limit")
		add(http.StatusUnsupportedMediaType, "the body's Content-Type is not JSON")
		add(http.StatusServiceUnavailable, "the server is reading as many request bodies as it holds at once; see Retry-After")
	}
	if len(op.Security) > 0 {
		add(http.StatusTooManyRequests, "too many failed authentications from this address; see Retry-After")
	}
	if takesSession(op) && op.Method != http.MethodGet && op.Method != http.MethodHead && op.Method != http.MethodOptions {
		const why = "a browser request from another origin authenticated by the session cookie (cross-site request forgery)"
		if r := op.Responses["403"]; r != nil {
			r.Description += "; also " + why
		}
		add(http.StatusForbidden, why)
	}
	op.Responses["431"] = &huma.Response{Description: "Request Header Fields Too Large: answered by the HTTP server, in plain text",
		Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: huma.TypeString}}}}
}

// takesSession reports whether op accepts the browser session cookie as credentials.
func takesSession(op *huma.Operation) bool {
	for _, req := range op.Security {
		if _, ok := req["session"]; ok {
			return true
		}
	}
	return false
}

// uuidString is the schema uuid.UUID is documented and validated as.
type uuidString string

// Schema is a uuid-formatted string.
func (uuidString) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Format: "uuid"}
}

// op fills what every operation shares: the auth rule, its security requirement, and the error
// statuses it can answer with (401 wherever credentials are read).
func op(o huma.Operation, mode authMode) huma.Operation {
	o.Metadata = map[string]any{metaAuth: mode}
	o.Security = securityFor(mode)
	if mode != authNone {
		o.Errors = append([]int{http.StatusUnauthorized}, o.Errors...)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	return o
}

// finishDocument applies the document-wide rules once every operation is registered.
func finishDocument(o *huma.OpenAPI) {
	allowUnknownRequestFields(o)
	nullablePointers(o)
	freeFormMaps(o)
}
