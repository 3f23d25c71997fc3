package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/xitongsys/parquet-go-source/buffer"
	"github.com/xitongsys/parquet-go/reader"

	"github.com/proctorhq/proctor/internal/testenv"
)

// tokenUpstream is an OpenAI-compatible server like vLLM serving a policy being trained: asked
// for them (logprobs and return_token_ids), it answers each call with prompt and completion
// token ids and the sampled tokens' logprobs, written as a server writes them (spacing, floats in
// exponent form), and keeps what it sent; asked without, it answers none and says so.
type tokenUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	// sent are the token parts of each answer, verbatim, in the order they were sent.
	sent []sentTokens
	// plain counts the calls that asked for no tokens.
	plain int
}

type sentTokens struct{ prompt, completion, logprobs string }

func newTokenUpstream(t *testing.T) *tokenUpstream {
	u := &tokenUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
			Logprobs       bool `json:"logprobs"`
			ReturnTokenIDs bool `json:"return_token_ids"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		done := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		items := []string{"buy milk", "walk the dog"}
		msg := `{"role":"assistant","content":"All todos are added."}`
		finish := "stop"
		if done < len(items) {
			msg = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"add_todo","arguments":%q}}]}`,
				done, fmt.Sprintf(`{"title":%q}`, items[done]))
			finish = "tool_calls"
		}
		extra, choiceExtra := "", ""
		u.mu.Lock()
		if req.Logprobs && req.ReturnTokenIDs {
			n := len(u.sent)
			st := sentTokens{
				prompt:     fmt.Sprintf("[151644, 8948,  %d, 198]", 1000+n),
				completion: fmt.Sprintf("[ %d,151645 ]", 2000+n),
				logprobs:   fmt.Sprintf(`{"content": [{"token": "token_id:%d", "logprob": -1.2345678901234567e-05, "bytes": [104]}, {"token": "<|im_end|>", "logprob": -0.0, "bytes": []}], "refusal": null}`, 2000+n),
			}
			u.sent = append(u.sent, st)
			extra = `"prompt_token_ids": ` + st.prompt + `,`
			choiceExtra = `"token_ids": ` + st.completion + `, "logprobs": ` + st.logprobs + `,`
		} else if !req.Logprobs && !req.ReturnTokenIDs {
			u.plain++
		} else {
			u.mu.Unlock()
			http.Error(w, `{"error":{"message":"asked for logprobs or token ids but not both"}}`, http.StatusBadRequest)
			return
		}
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "policy", %s
			"choices": [{"index": 0, %s "message": %s, "finish_reason": %q}],
			"usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}}`, extra, choiceExtra, msg, finish)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func TestATrainingPolicysTokensAreExportedAsTheUpstreamReturnedThem(t *testing.T) {
	eachStore(t, testPolicyTokens)
}

// testPolicyTokens runs an add-todos task with the built-in loop on a model registered as a
// training policy, whose upstream returns token ids and logprobs: the export gives each call's
// token ids and logprobs byte for byte as the upstream sent them, beside the assistant message
// they answered, with the loss mask over prompt and completion. The same upstream registered
// as an ordinary model is asked for no tokens, and its attempts export none.
func testPolicyTokens(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey}
	up := newTokenUpstream(t)
	policy := addScriptedModel(t, c, dataDir, storeArgs, "policy", up.srv.URL, "--training-policy")
	plain := addScriptedModel(t, c, dataDir, storeArgs, "plain", up.srv.URL)
	task := c.addTwoTodosTask("tokens")
	var jobID string
	export := func(model string, agent ...string) []map[string]json.RawMessage {
		t.Helper()
		launch := map[string]any{"task_version_id": task, "model_id": model}
		if len(agent) > 0 {
			launch["agent"] = agent[0]
		}
		tr, logs := c.runToEnd(launch)
		if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
			t.Fatalf("the attempt = %+v\n%s", tr, logs)
		}
		var job struct {
			JobID string `json:"job_id"`
		}
		c.call("GET", "/v2/trace/"+tr.ID, nil, &job)
		jobID = job.JobID
		req, _ := http.NewRequest("GET", c.base+"/v2/jobs/"+job.JobID+"/export", nil)
		req.Header.Set("Authorization", "Bearer "+c.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var lines []map[string]json.RawMessage
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var line map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
		}
		if len(lines) != 1 {
			t.Fatalf("the export: %d lines", len(lines))
		}
		return lines
	}

	line := export(policy)[0]
	var calls []struct {
		MessageIndex       int             `json:"message_index"`
		PromptTokenIDs     json.RawMessage `json:"prompt_token_ids"`
		CompletionTokenIDs json.RawMessage `json:"completion_token_ids"`
		Logprobs           json.RawMessage `json:"logprobs"`
		LossMask           []int           `json:"loss_mask"`
		Sampling           map[string]any  `json:"sampling"`
	}
	var messages []struct {
		Role string `json:"role"`
	}
	json.Unmarshal(line["model_calls"], &calls)
	json.Unmarshal(line["messages"], &messages)
	up.mu.Lock()
	sent, plainCalls := append([]sentTokens(nil), up.sent...), up.plain
	up.mu.Unlock()
	if len(calls) != 3 || len(sent) != 3 {
		t.Fatalf("model calls exported %d, the upstream answered %d with tokens:\n%s", len(calls), len(sent), line["model_calls"])
	}
	// Byte for byte, but for the whitespace between a JSON line's tokens: every number as the
	// upstream wrote it (-0.0 and the exponent kept), none parsed and written again.
	compact := func(s string) string {
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(s)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for i, call := range calls {
		if string(call.PromptTokenIDs) != compact(sent[i].prompt) || string(call.CompletionTokenIDs) != compact(sent[i].completion) ||
			string(call.Logprobs) != compact(sent[i].logprobs) || !strings.Contains(string(call.Logprobs), `"token":"<|im_end|>","logprob":-0.0,`) {
			t.Errorf("call %d exported\n  %s %s %s\nwant what the upstream sent\n  %s %s %s", i, call.PromptTokenIDs, call.CompletionTokenIDs, call.Logprobs,
				sent[i].prompt, sent[i].completion, sent[i].logprobs)
		}
		if call.MessageIndex >= len(messages) || messages[call.MessageIndex].Role != "assistant" ||
			!bytes.Equal(mustJSON(call.LossMask), []byte("[0,0,0,0,1,1]")) || call.Sampling["logprobs"] != true {
			t.Errorf("call %d: message %d of %d, loss mask %v, sampling %v", i, call.MessageIndex, len(messages), call.LossMask, call.Sampling)
		}
	}
	if plainCalls != 0 {
		t.Errorf("the policy's calls went out without asking for tokens %d times", plainCalls)
	}

	// The same attempt as Parquet (proctor export --format parquet), read back by a second,
	// independent Parquet implementation (xitongsys/parquet-go; the server writes with
	// parquet-go/parquet-go): its columns hold the line's fields, its nested ones as JSON text.
	var pq bytes.Buffer
	var progress bytes.Buffer
	if err := run(t.Context(), []string{"export", jobID, "--format", "parquet", "--api-url", c.base, "--api-key", c.key}, &pq, &progress); err != nil {
		t.Fatalf("proctor export --format parquet: %v\n%s", err, progress.String())
	}
	rows := readParquet(t, pq.Bytes())
	if len(rows) != 1 || rows[0]["Trace_id"] != string(bytes.Trim(line["trace_id"], `"`)) || rows[0]["Status"] != "completed" || rows[0]["Reward"] != 1.0 ||
		rows[0]["Steps"] != 3.0 || !strings.Contains(progress.String(), "bytes of Parquet exported") {
		t.Errorf("the Parquet export's rows: %v (progress %q)", rows, progress.String())
	}
	if len(rows) == 1 {
		var fromParquet, fromLine any
		json.Unmarshal([]byte(rows[0]["Model_calls"].(string)), &fromParquet)
		json.Unmarshal(line["model_calls"], &fromLine)
		if !reflect.DeepEqual(fromParquet, fromLine) || !strings.Contains(rows[0]["Model_calls"].(string), `"logprob":-0.0`) {
			t.Errorf("the Parquet row's model_calls differ from the line's:\n%s\n%s", rows[0]["Model_calls"], line["model_calls"])
		}
	}
	if code, body := c.raw("GET", "/v2/jobs/"+jobID+"/export?format=parquet&cursor=x", nil); code != 422 || !strings.Contains(body, "no cursor") {
		t.Errorf("a Parquet export with a cursor = %d %s, want 422", code, body)
	}

	// A brought agent's calls to the policy (the Go example's, through its attempt's port) are
	// asked for their tokens too, and kept the same way.
	if out, err := c.cli("agent", "deploy", filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "react"), "--name", "react"); err != nil {
		t.Fatalf("agent deploy: %v\n%s", err, out)
	}
	up.mu.Lock()
	before := len(up.sent)
	up.mu.Unlock()
	line = export(policy, "react")[0]
	var agentCalls []struct {
		CompletionTokenIDs json.RawMessage `json:"completion_token_ids"`
		Logprobs           json.RawMessage `json:"logprobs"`
	}
	json.Unmarshal(line["model_calls"], &agentCalls)
	up.mu.Lock()
	sent = append([]sentTokens(nil), up.sent[before:]...)
	up.mu.Unlock()
	if len(agentCalls) != 3 || len(sent) != 3 {
		t.Fatalf("a brought agent's calls: %d exported, %d answered with tokens:\n%s", len(agentCalls), len(sent), line["model_calls"])
	}
	for i, call := range agentCalls {
		if string(call.CompletionTokenIDs) != compact(sent[i].completion) || string(call.Logprobs) != compact(sent[i].logprobs) {
			t.Errorf("the agent's call %d exported %s %s, want %s %s", i, call.CompletionTokenIDs, call.Logprobs, sent[i].completion, sent[i].logprobs)
		}
	}

	line = export(plain)[0]
	up.mu.Lock()
	plainCalls = up.plain
	up.mu.Unlock()
	if got := strings.TrimSpace(string(line["model_calls"])); got != "[]" || plainCalls != 3 {
		t.Errorf("an ordinary model's attempt: model_calls %s, %d calls without tokens (want [] and 3)", got, plainCalls)
	}
}

// readParquet reads a Parquet file's rows with xitongsys/parquet-go, as generic values (its
// field names capitalised as it makes them).
func readParquet(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	pr, err := reader.NewParquetReader(buffer.NewBufferFileFromBytes(b), nil, 1)
	if err != nil {
		t.Fatalf("read the Parquet file (%d bytes): %v", len(b), err)
	}
	defer pr.ReadStop()
	rows, err := pr.ReadByNumber(int(pr.GetNumRows()))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(rows)
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
