package apitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckerFindsResponsesThatBreakTheDocument(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	events := "/v2/trace/41326608-9488-4305-8fa6-d848c44fa3c0/events"
	ok := `{"events":[{"id":"7","seq":0,"kind":"tool_call","text":"","data":{"arguments":null},"attempt":1,"started_at":"2026-11-22T19:41:46.402Z","ended_at":null,"parent_id":"","superseded":false}],"latest_seq":0,"status":"running","reward":null}`
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name, path string
		status     int
		body       string
		broken     bool
	}{
		{"a valid answer, null inside a free-form object", events, 200, ok, false},
		{"a wrong type", events, 200, strings.Replace(ok, `"seq":0`, `"seq":"zero"`, 1), true},
		{"a missing required field", events, 200, strings.Replace(ok, `"latest_seq":0,`, "", 1), true},
		{"a field the document does not name", events, 200, strings.Replace(ok, `"reward":null`, `"reward":null,"secret":1`, 1), true},
		{"an undocumented status", events, 418, `{"error":{"code":"teapot","message":"no"}}`, true},
		{"a documented error without the envelope", events, 404, `{"detail":"nope"}`, true},
		{"a path no operation has", "/nowhere", 500, `oops`, false},
	} {
		before := len(c.Failures())
		c.Check(httptest.NewRequest("GET", tc.path, nil), tc.status, jsonHeader, []byte(tc.body))
		if got := len(c.Failures()) > before; got != tc.broken {
			t.Errorf("%s: reported %v, want %v: %v", tc.name, got, tc.broken, c.Failures())
		}
	}
	checked, _ := c.Coverage()
	if len(checked) != 1 || checked[0] != "get-trace-events" {
		t.Errorf("coverage = %v, want only get-trace-events", checked)
	}
}
