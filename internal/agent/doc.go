// Package agent holds the pieces of Proctor's agent loop, each usable on its own so that the
// rollout workflow can run them as separate, retryable activities:
//
//   - [Env], an MCP client session to one sandboxed environment: the tools an agent may see
//     (the setup and evaluate hubs hidden), visible tool calls, hub calls and scenarios;
//   - [AgentConfig] and [FilterTools], which narrow the tools per task (allowed_tools and
//     disallowed_tools glob patterns) and [SystemPrompt], which appends the task's extra
//     instructions;
//   - [Model], one inference call per [Model.Step], with adapters for OpenAI-compatible chat
//     completions ([NewOpenAI]), Anthropic messages ([NewAnthropic]) and the built-in
//     [NewOracle], which replays a task's validation calls;
//   - [ExtractReward], which reads the reward out of an evaluate result.
//
// The conversation is never held here between calls: every [StepRequest] carries the whole
// conversation, rebuilt by the caller from stored trace events, and every adapter is stateless,
// so a step retried on another worker after a crash behaves like the first try. For the same
// reason the SDKs' own retries are disabled: whether and when to retry a failed model call
// ([APIError.Retryable]) is the workflow's decision.
//
// [RunEpisode] strings the pieces together in one process (scenario, setup, loop, evaluate), as
// the rollout workflow does across activities; tests and benchmarks use it.
//
// agent may import the standard library, the MCP Go SDK and the OpenAI and Anthropic Go SDKs.
// It must never import envserver: it speaks to environments only through MCP, as it would to
// one written in any language, and the few envserver conventions it relies on (the
// "proctor/role" tool meta, the "proctor/setup" and "proctor/evaluate" prompt meta) are
// restated here as constants.
package agent
