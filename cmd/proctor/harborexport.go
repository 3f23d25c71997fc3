package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// harborAttempt is what the Harbor layout takes of an export line (httpapi.ExportLine).
type harborAttempt struct {
	TraceID          string     `json:"trace_id"`
	JobID            string     `json:"job_id"`
	TaskName         string     `json:"task_name"`
	Digest           string     `json:"environment_digest"`
	ModelName        string     `json:"model_name"`
	Status           string     `json:"status"`
	StopReason       string     `json:"stop_reason"`
	Error            string     `json:"error"`
	Reward           *float64   `json:"reward"`
	StartTime        *time.Time `json:"start_time"`
	EndTime          *time.Time `json:"end_time"`
	EvaluationResult *struct {
		Reward *float64       `json:"reward"`
		Info   map[string]any `json:"info"`
	} `json:"evaluation_result"`
	Messages json.RawMessage `json:"messages"`
	Tools    json.RawMessage `json:"tools"`
	Steps    int             `json:"steps"`
	Usage    json.RawMessage `json:"usage"`
}

// Harbor's trial result (result.json of a trial), the fields Proctor fills.
type harborTrialResult struct {
	ID             string               `json:"id"`
	TaskName       string               `json:"task_name"`
	TrialName      string               `json:"trial_name"`
	TrialURI       string               `json:"trial_uri"`
	TaskID         map[string]string    `json:"task_id"`
	Source         string               `json:"source"`
	TaskChecksum   string               `json:"task_checksum"`
	AgentInfo      harborAgentInfo      `json:"agent_info"`
	VerifierResult *harborVerifier      `json:"verifier_result"`
	ExceptionInfo  *harborExceptionInfo `json:"exception_info"`
	StartedAt      *time.Time           `json:"started_at"`
	FinishedAt     *time.Time           `json:"finished_at"`
}

type harborAgentInfo struct {
	Name      string          `json:"name"`
	Version   string          `json:"version"`
	ModelInfo harborModelInfo `json:"model_info"`
}

type harborModelInfo struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
}

type harborVerifier struct {
	Rewards map[string]float64 `json:"rewards"`
}

type harborExceptionInfo struct {
	ExceptionType      string     `json:"exception_type"`
	ExceptionMessage   string     `json:"exception_message"`
	ExceptionTraceback string     `json:"exception_traceback"`
	OccurredAt         *time.Time `json:"occurred_at"`
}

// harborJobResult is the job's result.json: its trials counted, and their mean reward.
type harborJobResult struct {
	ID           string     `json:"id"`
	StartedAt    *time.Time `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
	NTotalTrials int        `json:"n_total_trials"`
	Stats        struct {
		NTrials    int      `json:"n_trials"`
		NErrors    int      `json:"n_errors"`
		MeanReward *float64 `json:"mean_reward"`
	} `json:"stats"`
}

// unsafeName is what a trial's folder name may not hold.
var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// harborWriter writes a job's attempts in Harbor's job layout under dir: dir/<job>/result.json,
// and per attempt (a trial) dir/<job>/<task>__<trace>/ with result.json, agent/trajectory.json
// (the conversation, in OpenAI's chat format, and the tools), and verifier/ (reward.txt or
// reward.json as the verifier read them, test-stdout.txt and test-stderr.txt).
type harborWriter struct {
	dir     string
	job     harborJobResult
	sum     float64
	pending []byte // a line not whole yet
}

// Write takes the export's JSON Lines, in pieces of any size.
func (h *harborWriter) Write(p []byte) (int, error) {
	h.pending = append(h.pending, p...)
	for {
		i := bytes.IndexByte(h.pending, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := h.pending[:i]
		h.pending = h.pending[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var a harborAttempt
		if err := json.Unmarshal(line, &a); err != nil {
			return 0, fmt.Errorf("export line: %w", err)
		}
		if err := h.trial(a); err != nil {
			return 0, err
		}
	}
}

func (h *harborWriter) trial(a harborAttempt) error {
	if _, err := uuid.Parse(a.JobID); err != nil {
		return fmt.Errorf("export line: job id %q: %w", a.JobID, err)
	}
	id, err := uuid.Parse(a.TraceID)
	if err != nil {
		return fmt.Errorf("export line: trace id %q: %w", a.TraceID, err)
	}
	short := a.TaskName[strings.LastIndex(a.TaskName, "/")+1:]
	name := strings.Trim(unsafeName.ReplaceAllString(short, "-"), ".-") + "__" + strings.ReplaceAll(id.String(), "-", "")[:7]
	jobDir := filepath.Join(h.dir, a.JobID)
	dir := filepath.Join(jobDir, name)
	for _, d := range []string{filepath.Join(dir, "agent"), filepath.Join(dir, "verifier")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	abs, _ := filepath.Abs(dir)
	res := harborTrialResult{ID: a.TraceID, TaskName: a.TaskName, TrialName: name, TrialURI: "file://" + abs,
		TaskID: map[string]string{"path": a.TaskName}, Source: "proctor", TaskChecksum: a.Digest,
		AgentInfo: harborAgentInfo{Name: "proctor", Version: "1", ModelInfo: harborModelInfo{Name: a.ModelName, Provider: "proctor"}},
		StartedAt: a.StartTime, FinishedAt: a.EndTime}
	var info map[string]any
	if a.EvaluationResult != nil {
		info = a.EvaluationResult.Info
	}
	if a.Status == "completed" && a.Reward != nil {
		rewards := map[string]float64{"reward": *a.Reward}
		if all, ok := info["rewards"].(map[string]any); ok && len(all) > 0 {
			rewards = map[string]float64{}
			for k, v := range all {
				if f, ok := v.(float64); ok {
					rewards[k] = f
				}
			}
		}
		res.VerifierResult = &harborVerifier{Rewards: rewards}
		file, content := "reward.txt", []byte(strconv.FormatFloat(*a.Reward, 'g', -1, 64)+"\n")
		if len(rewards) > 1 {
			file, content = "reward.json", indentedJSON(rewards)
		}
		if err := os.WriteFile(filepath.Join(dir, "verifier", file), content, 0o644); err != nil {
			return err
		}
		h.sum += *a.Reward
	}
	if a.Status != "completed" {
		kind := "ProctorError"
		if strings.Contains(a.Error, "task fault: ") {
			kind = "TaskFault"
		}
		res.ExceptionInfo = &harborExceptionInfo{ExceptionType: kind, ExceptionMessage: strings.TrimSpace(a.Status + ": " + a.Error), OccurredAt: a.EndTime}
		h.job.Stats.NErrors++
	}
	for file, key := range map[string]string{"test-stdout.txt": "test_stdout", "test-stderr.txt": "test_stderr"} {
		if s, ok := info[key].(string); ok {
			if err := os.WriteFile(filepath.Join(dir, "verifier", file), []byte(s), 0o644); err != nil {
				return err
			}
		}
	}
	trajectory := map[string]any{"messages": a.Messages, "tools": a.Tools, "steps": a.Steps, "usage": a.Usage, "stop_reason": a.StopReason}
	if err := os.WriteFile(filepath.Join(dir, "agent", "trajectory.json"), indentedJSON(trajectory), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "result.json"), indentedJSON(res), 0o644); err != nil {
		return err
	}
	h.job.ID = a.JobID
	h.job.NTotalTrials++
	h.job.Stats.NTrials++
	if a.StartTime != nil && (h.job.StartedAt == nil || a.StartTime.Before(*h.job.StartedAt)) {
		h.job.StartedAt = a.StartTime
	}
	if a.EndTime != nil && (h.job.FinishedAt == nil || a.EndTime.After(*h.job.FinishedAt)) {
		h.job.FinishedAt = a.EndTime
	}
	return nil
}

// close writes the job's result.json.
func (h *harborWriter) close() error {
	if len(bytes.TrimSpace(h.pending)) > 0 {
		return errors.New("the export ended within a line")
	}
	if h.job.ID == "" {
		return errors.New("the job has no attempts to write")
	}
	if scored := h.job.Stats.NTrials - h.job.Stats.NErrors; scored > 0 {
		mean := h.sum / float64(scored)
		h.job.Stats.MeanReward = &mean
	}
	return os.WriteFile(filepath.Join(h.dir, h.job.ID, "result.json"), indentedJSON(h.job), 0o644)
}

// indentedJSON is v as indented JSON, with a final newline.
func indentedJSON(v any) []byte {
	b, _ := json.MarshalIndent(v, "", "  ")
	return append(b, '\n')
}

var _ io.Writer = (*harborWriter)(nil)
