package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
)

func (a *adminRun) modelAdd(ctx context.Context) error {
	switch a.adapter {
	case models.AdapterOpenAI, models.AdapterAnthropic, models.AdapterOracle, models.AdapterIdle, models.AdapterRandom, models.AdapterTamper,
		models.AdapterReplay:
	default:
		return fmt.Errorf("--adapter must be openai, anthropic, oracle, idle, random, tamper or replay, not %q", a.adapter)
	}
	if a.name == "" {
		return errors.New("--name is required: the model_name clients resolve")
	}
	// Members' own keys (BYOK) go to the provider the model names: a model served from
	// elsewhere (a --base-url) is "custom" unless --provider says whose API it is.
	prov := a.provider
	if prov == "" {
		prov = a.adapter
		if a.baseURL != "" {
			prov = "custom"
		}
	}
	if a.inCost < 0 || a.outCost < 0 {
		return errors.New("--input-cost-per-token and --output-cost-per-token must not be negative")
	}
	m := &models.LLMModel{ModelName: a.name, Name: a.name, Provider: prov, Adapter: a.adapter, BaseURL: a.baseURL, APIKeyEnv: a.keyEnv,
		InputCostPerToken: a.inCost, OutputCostPerToken: a.outCost, Trainable: a.trainable, TrainingPolicy: a.trainingPolicy}
	if a.trainingPolicy && a.adapter != models.AdapterOpenAI {
		return errors.New("--training-policy needs --adapter openai: token ids and logprobs are asked of OpenAI-compatible servers (vLLM, SGLang)")
	}
	if a.teamID != "" {
		tid, err := a.team(ctx)
		if err != nil {
			return err
		}
		m.TeamID = &tid
	}
	if err := llms.Of(a.store).UpsertModel(ctx, m); err != nil {
		return err
	}
	fmt.Fprintf(a.tw, "model\t%s\nname\t%s\n", m.ID, m.ModelName)
	if why := unreachableModel(ctx, m.BaseURL); why != "" {
		fmt.Fprintf(a.stderr, "warning: nothing answers at %s (%s): attempts on model %s end in error until a server does\n", m.BaseURL, why, m.ModelName)
	}
	return nil
}

// unreachableModel says why no connection to a model's server at base can be made from here (a
// worker may see another network, so it is a warning), or "" when one can, or there is no base
// URL to try. Only a connection is made: nothing is sent, no key included.
func unreachableModel(ctx context.Context, base string) string {
	u, err := url.Parse(base)
	if base == "" || err != nil || u.Host == "" {
		return ""
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[bool]string{true: "443", false: "80"}[u.Scheme == "https"])
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", host)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return err.Error()
	}
	conn.Close()
	return ""
}

func (a *adminRun) tasksetRequirements(ctx context.Context) error {
	id, err := uuid.Parse(a.tasksetID)
	if err != nil {
		return fmt.Errorf("--taskset must be a taskset id (uuid): %w", err)
	}
	var req *models.Requirements
	dec := json.NewDecoder(strings.NewReader(a.reqJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := catalog.Of(a.store).SetTasksetRequirements(ctx, id, req); err != nil {
		return err
	}
	fmt.Fprintln(a.tw, "requirements set for", id)
	return nil
}
