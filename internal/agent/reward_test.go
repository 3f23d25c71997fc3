package agent

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestExtractReward(t *testing.T) {
	tests := []struct {
		name       string
		in         *ToolResult
		wantReward float64
		wantDone   bool
		wantInfo   map[string]any
		wantReason string // a substring; "" means no reason
	}{
		{"structured reward, done and info", &ToolResult{Structured: map[string]any{"reward": 0.75, "done": true, "info": map[string]any{"missing": []any{"x"}}}},
			0.75, true, map[string]any{"missing": []any{"x"}}, ""},
		{"structured grade", &ToolResult{Structured: map[string]any{"grade": 1.0}}, 1, false, nil, ""},
		{"structured score", &ToolResult{Structured: map[string]any{"score": 0.5, "done": true}}, 0.5, true, nil, ""},
		{"reward wins over grade and score", &ToolResult{Structured: map[string]any{"score": 0.1, "grade": 0.2, "reward": 0.3}}, 0.3, false, nil, ""},
		{"a number in a string", &ToolResult{Structured: map[string]any{"reward": "0.25"}}, 0.25, false, nil, ""},
		{"JSON in the text", &ToolResult{Text: `{"reward": 1, "done": true}`}, 1, true, nil, ""},
		{"JSON inside prose", &ToolResult{Text: "Graded {not json} then: {\"score\": 0.4, \"info\": {\"k\": \"v\"}} ok"}, 0.4, false, map[string]any{"k": "v"}, ""},
		{"text when the structured content has no reward", &ToolResult{Structured: map[string]any{"todos": []any{}}, Text: `{"grade": 0.9}`}, 0.9, false, nil, ""},
		{"not clamped: the scale is the environment's", &ToolResult{Structured: map[string]any{"reward": 7.0}}, 7, false, nil, ""},
		{"negative rewards too", &ToolResult{Structured: map[string]any{"reward": -1.0}}, -1, false, nil, ""},
		{"nothing", &ToolResult{}, 0, false, nil, "empty"},
		{"text without a reward", &ToolResult{Text: "all good"}, 0, false, nil, "no reward, grade or score"},
		{"structured content without a reward", &ToolResult{Structured: map[string]any{"ok": true}}, 0, false, nil, "no reward, grade or score"},
		{"NaN", &ToolResult{Structured: map[string]any{"reward": "NaN"}}, 0, false, nil, "not a finite number"},
		{"infinity", &ToolResult{Structured: map[string]any{"reward": math.Inf(1)}}, 0, false, nil, "not a finite number"},
		{"not a number", &ToolResult{Structured: map[string]any{"reward": "high", "done": true}}, 0, true, nil, `"reward": not a number`},
		{"a boolean is not a number", &ToolResult{Structured: map[string]any{"reward": true}}, 0, false, nil, "not a number"},
		{"a failed evaluation", &ToolResult{IsError: true, Text: "evaluate has no function \"x\""}, 0, false, nil, "evaluate failed: evaluate has no function"},
		{"no result", nil, 0, false, nil, "no evaluation result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reward, done, info, reason := ExtractReward(tt.in)
			if reward != tt.wantReward || done != tt.wantDone || !reflect.DeepEqual(info, tt.wantInfo) {
				t.Errorf("ExtractReward = %v, %v, %v; want %v, %v, %v", reward, done, info, tt.wantReward, tt.wantDone, tt.wantInfo)
			}
			if tt.wantReason == "" && reason != "" || !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason = %q, want %q", reason, tt.wantReason)
			}
		})
	}
}
