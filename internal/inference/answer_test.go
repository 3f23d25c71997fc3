package inference

import (
	"testing"
)

// Answers are read whole or streamed, in either protocol, into the same step.
func TestParseAnswerReadsWholeAndStreamedAnswers(t *testing.T) {
	cases := []struct {
		name, protocol string
		stream         bool
		answer         string
	}{
		{"openai", ProtocolOpenAI, false, `{"id":"c","object":"chat.completion","model":"gpt","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"adding",` +
			`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add_todo","arguments":"{\"title\":\"milk\"}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`},
		{"openai stream", ProtocolOpenAI, true, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"add\"}}]}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ing\"}}]}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"add_todo\",\"arguments\":\"{\\\"title\\\":\"}}]}}]}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"milk\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n" +
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n" +
			"data: [DONE]\n\n"},
		{"anthropic", ProtocolAnthropic, false, `{"id":"m","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"adding"},` +
			`{"type":"tool_use","id":"call_1","name":"add_todo","input":{"title":"milk"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}`},
		{"anthropic stream", ProtocolAnthropic, true, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"adding\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"add_todo\",\"input\":{}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"title\\\": \\\"milk\\\"}\"}}\n\n" +
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":4}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := ParseAnswer(c.protocol, c.stream, []byte(c.answer))
			if err != nil {
				t.Fatal(err)
			}
			m := out.Message
			if m.Content != "adding" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_1" || m.ToolCalls[0].Name != "add_todo" || m.ToolCalls[0].Arguments["title"] != "milk" {
				t.Errorf("message = %+v", m)
			}
			if out.Model == "" {
				t.Error("no model")
			}
		})
	}
	if _, err := ParseAnswer(ProtocolOpenAI, false, []byte(`not json`)); err == nil {
		t.Error("an unreadable answer was read")
	}
}
