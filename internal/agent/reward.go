package agent

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// TaskFaultPrefix starts the text of an evaluate call's tool error that says the task itself is
// broken, not the attempt poor (envserver.TaskFault, whose prefix is the same).
const TaskFaultPrefix = "task fault: "

// TaskFault reports whether r, an evaluate call's result, says the task itself is broken: the
// attempt then ends in error, not scored.
func TaskFault(r *ToolResult) bool {
	return r != nil && r.IsError && strings.HasPrefix(strings.TrimSpace(r.Text), strings.TrimSpace(TaskFaultPrefix))
}

// rewardKeys are the fields a reward is read from, in order of preference.
var rewardKeys = [...]string{"reward", "grade", "score"}

// ExtractReward reads the reward of an evaluate call's result. It looks, in order, at the
// structured content's "reward", "grade" and "score", then at the first JSON object in the text
// content that has one of them; the first of those fields present decides. done and info come
// from the same object ("done" a boolean, "info" an object).
//
// When no reward can be read the reward is 0 and reason says why: a tool error, no such field,
// a value that is not a number, NaN or ±Inf. A reward that was read has an empty reason. The
// reward is not clamped to [0, 1]: environments may score on other scales, and hiding that
// would hide a broken evaluator; callers that need [0, 1] check it themselves.
//
// Numbers may be JSON numbers or strings holding one ("0.5"), which some graders send.
func ExtractReward(r *ToolResult) (reward float64, done bool, info map[string]any, reason string) {
	if r == nil {
		return 0, false, nil, "no evaluation result"
	}
	if r.IsError {
		return 0, false, nil, "evaluate failed: " + truncate(r.Text, 500)
	}
	if obj := r.Structured; hasRewardKey(obj) {
		return rewardFrom(obj, "structured content")
	}
	if obj := jsonObjectIn(r.Text); obj != nil {
		return rewardFrom(obj, "text content")
	}
	if r.Structured != nil {
		return 0, false, nil, "the evaluation result has no reward, grade or score"
	}
	if strings.TrimSpace(r.Text) == "" {
		return 0, false, nil, "the evaluation result is empty"
	}
	return 0, false, nil, "no reward, grade or score in the evaluation result: " + truncate(r.Text, 200)
}

func hasRewardKey(obj map[string]any) bool {
	for _, k := range rewardKeys {
		if _, ok := obj[k]; ok {
			return true
		}
	}
	return false
}

func rewardFrom(obj map[string]any, where string) (float64, bool, map[string]any, string) {
	done, _ := obj["done"].(bool)
	info, _ := obj["info"].(map[string]any)
	for _, k := range rewardKeys {
		v, ok := obj[k]
		if !ok {
			continue
		}
		f, err := number(v)
		if err != nil {
			return 0, done, info, fmt.Sprintf("%s %q: %v", where, k, err)
		}
		return f, done, info, ""
	}
	return 0, done, info, where + " has no reward, grade or score"
}

// number reads a finite number.
func number(v any) (float64, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, fmt.Errorf("not a number: %q", x)
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, fmt.Errorf("not a number: %q", x)
		}
	default:
		return 0, fmt.Errorf("not a number: %v (%T)", v, v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a finite number: %v", f)
	}
	return f, nil
}

// jsonObjectIn finds the first JSON object in text that has a reward key: the whole text, or
// one embedded in prose ("Result: {...}").
func jsonObjectIn(text string) map[string]any {
	// A bound on the attempts keeps a huge text full of braces from costing quadratic time.
	const maxAttempts = 64
	for i, attempts := 0, 0; i < len(text) && attempts < maxAttempts; i++ {
		if text[i] != '{' {
			continue
		}
		attempts++
		var obj map[string]any
		if err := json.NewDecoder(strings.NewReader(text[i:])).Decode(&obj); err == nil && hasRewardKey(obj) {
			return obj
		}
	}
	return nil
}
