package activities

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/proctorhq/proctor/models"
)

// RedactedMark stands in a try's records for a value of the launching member's secrets.
const RedactedMark = "[redacted]"

// minRedacted is the shortest secret value that is redacted: a shorter one would blot out common
// words and numbers wherever they appear (an API key or a token is far longer).
const minRedacted = 8

// redactor takes the launching member's secret values out of what a try records: the events its
// environment's answers become, and its environment's log. The environment holds the values (a
// task may need them), but the trace is read by the whole team and sent to models.
type redactor struct{ r *strings.Replacer }

// newRedactor redacts values (each as it is, and as a JSON string spells it); nil when none is
// long enough to redact.
func newRedactor(values []string) *redactor {
	var pairs []string
	for _, v := range values {
		if len(v) < minRedacted {
			continue
		}
		pairs = append(pairs, v, RedactedMark)
		// As a JSON string spells it, with and without HTML's characters escaped.
		seen := map[string]bool{v: true}
		for _, html := range []bool{true, false} {
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(v) != nil {
				continue
			}
			if esc := strings.TrimSuffix(b.String(), "\n"); !seen[esc[1:len(esc)-1]] {
				seen[esc[1:len(esc)-1]] = true
				pairs = append(pairs, esc[1:len(esc)-1], RedactedMark)
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return &redactor{strings.NewReplacer(pairs...)}
}

// text is s without the values.
func (r *redactor) text(s string) string {
	if r == nil {
		return s
	}
	return r.r.Replace(s)
}

// event takes the values out of an event's text and data (a JSON document: a value is replaced
// inside its strings, so the document stays valid).
func (r *redactor) event(ev *models.TraceEvent) {
	if r == nil {
		return
	}
	ev.Text = r.text(ev.Text)
	if len(ev.Data) > 0 {
		ev.Data = json.RawMessage(r.text(string(ev.Data)))
	}
}

// evaluation takes the values out of an evaluation's explanation, reason and details.
func (r *redactor) evaluation(res *models.EvaluationResult) {
	if r == nil || res == nil {
		return
	}
	res.Content, res.Reason = r.text(res.Content), r.text(res.Reason)
	if res.Info == nil {
		return
	}
	b, err := json.Marshal(res.Info)
	if err != nil {
		return
	}
	var info map[string]any
	if json.Unmarshal([]byte(r.text(string(b))), &info) == nil {
		res.Info = info
	}
}

// events redacts evs in place and answers them.
func (r *redactor) events(evs []models.TraceEvent) []models.TraceEvent {
	for i := range evs {
		r.event(&evs[i])
	}
	return evs
}

// appendTraceEvents writes events of a try whose environment is le, redacted (nil le: as they are).
func (a *Activities) appendTraceEvents(ctx context.Context, le *liveEnv, evs []models.TraceEvent) error {
	if le != nil {
		le.redact.events(evs)
	}
	return a.rollouts().AppendTraceEvents(ctx, evs)
}
