package inference

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/proctorhq/proctor/internal/agent"
)

// ParseAnswer reads a relayed answer (RelayResult.Answer) as the step it is: the assistant's
// message (text and tool calls), its usage and the model that answered, whether the provider
// sent it whole or as server-sent events. The providers' own SDK types decode it, and their
// stream accumulators put a streamed one together, as a client of that SDK would.
func ParseAnswer(protocol string, stream bool, answer []byte) (*agent.StepResult, error) {
	switch {
	case protocol == ProtocolOpenAI && !stream:
		var res openai.ChatCompletion
		if err := json.Unmarshal(answer, &res); err != nil {
			return nil, fmt.Errorf("%w: %v", agent.ErrBadResponse, err)
		}
		return agent.OpenAIAnswer(&res)
	case protocol == ProtocolOpenAI:
		var acc openai.ChatCompletionAccumulator
		err := sseData(answer, func(data []byte) error {
			var chunk openai.ChatCompletionChunk
			if err := json.Unmarshal(data, &chunk); err != nil {
				return err
			}
			acc.AddChunk(chunk)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", agent.ErrBadResponse, err)
		}
		return agent.OpenAIAnswer(&acc.ChatCompletion)
	case !stream:
		var res anthropic.Message
		if err := json.Unmarshal(answer, &res); err != nil {
			return nil, fmt.Errorf("%w: %v", agent.ErrBadResponse, err)
		}
		return agent.AnthropicAnswer(&res), nil
	default:
		var msg anthropic.Message
		err := sseData(answer, func(data []byte) error {
			var ev anthropic.MessageStreamEventUnion
			if err := json.Unmarshal(data, &ev); err != nil {
				return err
			}
			if ev.Type == "ping" || ev.Type == "error" {
				return nil
			}
			return msg.Accumulate(ev)
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %v", agent.ErrBadResponse, err)
		}
		return agent.AnthropicAnswer(&msg), nil
	}
}

// sseData calls each for the data of each server-sent event of body, up to OpenAI's [DONE].
func sseData(body []byte, each func([]byte) error) error {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), maxRelayedBody)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		if err := each(data); err != nil {
			return err
		}
	}
	return sc.Err()
}

// OpenAIStreamTokens reads the token ids and logprobs of a streamed chat completion's raw answer
// (server-sent events, as Relay captured it), with sampling, the request's sampling parameters as
// a JSON object. A stream brings them in pieces (vLLM and SGLang: the prompt's token ids in the
// first chunk, and each chunk's choice its own token ids and logprobs): the first choice's are
// put together in order, each element's own bytes kept, into what a whole answer would carry — a
// token_ids array, and a logprobs object of the content list. A value no chunk brought stays
// empty.
func OpenAIStreamTokens(answer []byte, sampling string) (*agent.Tokens, error) {
	var prompt json.RawMessage
	var ids, content []json.RawMessage
	sawIDs, sawContent := false, false
	err := sseData(answer, func(data []byte) error {
		var chunk struct {
			PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
			Choices        []struct {
				Index    int             `json:"index"`
				TokenIDs json.RawMessage `json:"token_ids"`
				Logprobs *struct {
					Content json.RawMessage `json:"content"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return err
		}
		if len(prompt) == 0 && !isNull(chunk.PromptTokenIDs) {
			prompt = chunk.PromptTokenIDs
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if !isNull(c.TokenIDs) {
				var part []json.RawMessage
				if err := json.Unmarshal(c.TokenIDs, &part); err != nil {
					return fmt.Errorf("token_ids: %w", err)
				}
				ids, sawIDs = append(ids, part...), true
			}
			if c.Logprobs != nil && !isNull(c.Logprobs.Content) {
				var part []json.RawMessage
				if err := json.Unmarshal(c.Logprobs.Content, &part); err != nil {
					return fmt.Errorf("logprobs.content: %w", err)
				}
				content, sawContent = append(content, part...), true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the streamed answer's tokens: %w", err)
	}
	t := &agent.Tokens{Sampling: sampling}
	if !isNull(prompt) {
		t.PromptTokenIDs = string(prompt)
	}
	if sawIDs {
		t.CompletionTokenIDs = "[" + string(bytes.Join(rawBytes(ids), []byte(","))) + "]"
	}
	if sawContent {
		t.Logprobs = `{"content":[` + string(bytes.Join(rawBytes(content), []byte(","))) + "]}"
	}
	return t, nil
}

func isNull(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

func rawBytes(vs []json.RawMessage) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
