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
