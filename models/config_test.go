package models_test

import (
	"encoding/json"
	"testing"

	"github.com/proctorhq/proctor/models"
)

func TestAgentConfigKeepsKeysItDoesNotName(t *testing.T) {
	in := `{"allowed_tools":["todo_*"],"system_prompt":"Be brief.","temperature":0.2,"model_params":{"top_p":0.9}}`
	var c models.AgentConfig
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.AllowedTools) != 1 || c.SystemPrompt != "Be brief." || c.Extra["temperature"] != 0.2 || len(c.Extra) != 2 {
		t.Fatalf("decoded %+v", c)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	if ja, jb := mustJSON(a), mustJSON(b); ja != jb {
		t.Errorf("round trip = %s, want %s", jb, ja)
	}
	if out, _ := json.Marshal(models.AgentConfig{}); string(out) != "{}" {
		t.Errorf("the zero config encodes as %s, want {}", out)
	}
	for _, bad := range []string{`{"allowed_tools":"todo_*"}`, `{"system_prompt":["x"]}`, `{"disallowed_tools":[1]}`} {
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
	if verr := (models.AgentConfig{AllowedTools: []string{"ok_*", "[a-"}, DisallowedTools: []string{"\\"}}).Check("agent_config"); len(verr) != 2 ||
		verr[0].Location != "agent_config.allowed_tools[1]" || verr[1].Location != "agent_config.disallowed_tools[0]" {
		t.Errorf("Check = %+v", verr)
	}
}

func TestRuntimeConfigOverridesFieldByField(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	on := true
	base := models.RuntimeConfig{Image: "env:1", Limits: &models.RuntimeLimits{RunTimeoutS: f(60), StartupTimeoutS: f(30)},
		Resources: &models.RuntimeResources{CPU: f(2), GPU: &models.GPUResource{Count: 1, Type: "h100"}}}
	got := models.RuntimeConfig{Limits: &models.RuntimeLimits{RunTimeoutS: f(600)}, Network: &on}.Over(base)
	if got.Image != "env:1" || *got.Limits.RunTimeoutS != 600 || *got.Limits.StartupTimeoutS != 30 || *got.Resources.CPU != 2 ||
		got.Resources.GPU.Type != "h100" || got.Network == nil || !*got.Network {
		t.Errorf("override = %s", mustJSON(got))
	}
	if *base.Limits.RunTimeoutS != 60 {
		t.Error("Over changed its base")
	}
	if got := (models.RuntimeConfig{}).Over(base); mustJSON(got) != mustJSON(base) {
		t.Errorf("an empty override = %s, want the base", mustJSON(got))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
