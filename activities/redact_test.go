package activities

import (
	"encoding/json"
	"testing"

	"github.com/proctorhq/proctor/models"
)

// A secret value is redacted from an event's text and data however the data spells it, the data
// stays a JSON document, and values too short to be secrets are left alone.
func TestARedactorTakesSecretsOutOfEvents(t *testing.T) {
	r := newRedactor([]string{"sk-live-123456", `pa"ss<word>99`, "short"})
	data, _ := json.Marshal(map[string]string{"key": "sk-live-123456", "quoted": `pa"ss<word>99`, "word": "short"})
	ev := models.TraceEvent{Text: "the key is sk-live-123456", Data: data}
	r.event(&ev)
	if ev.Text != "the key is [redacted]" {
		t.Errorf("text = %q", ev.Text)
	}
	var got map[string]string
	if err := json.Unmarshal(ev.Data, &got); err != nil {
		t.Fatalf("the redacted data is no JSON document: %v: %s", err, ev.Data)
	}
	if got["key"] != RedactedMark || got["quoted"] != RedactedMark || got["word"] != "short" {
		t.Errorf("data = %v", got)
	}
	// A document whose encoder left HTML's characters as they are.
	ev = models.TraceEvent{Data: json.RawMessage(`{"v":"pa\"ss<word>99"}`)}
	r.event(&ev)
	if string(ev.Data) != `{"v":"[redacted]"}` {
		t.Errorf("data without HTML escapes = %s", ev.Data)
	}
	// The evaluation the trace keeps: its explanation, its reason and its details.
	res := &models.EvaluationResult{Content: "used sk-live-123456", Reason: "no sk-live-123456", Info: map[string]any{"key": "sk-live-123456", "n": 1.0}}
	r.evaluation(res)
	if res.Content != "used [redacted]" || res.Reason != "no [redacted]" || res.Info["key"] != RedactedMark || res.Info["n"] != 1.0 {
		t.Errorf("evaluation = %+v", res)
	}
	if newRedactor([]string{"short", ""}) != nil {
		t.Error("a redactor of nothing long enough to redact")
	}
	var none *redactor
	if none.text("x") != "x" {
		t.Error("a nil redactor changed the text")
	}
}
