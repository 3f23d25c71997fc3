// Package envserver is the Go SDK for writing Proctor environments: the MCP servers that run
// inside sandboxes, that agents work in, and that the platform sets up and scores. It
// implements the environment-server contract on top of the official MCP Go SDK and keeps every
// feature of that SDK reachable through [Server.MCP].
//
// An environment is a [Server] with:
//
//   - an initialize hook ([Server.OnInitialize]) that prepares state during the MCP initialize
//     request, once per server, with progress notifications (on unix, a stdio server points fd 1
//     at stderr for its whole life, so nothing the hook or a tool prints can corrupt the stream);
//   - a shutdown hook ([Server.OnShutdown]) that runs when the container is terminated (SIGTERM),
//     never on SIGINT (hot reload) or a cancelled context;
//   - tools the agent sees ([AddTool], [Server.AddTool], [Server.AddRawTool]);
//   - hubs ([NewHub], [Server.Mount]): namespaces of hidden tools reached through one dispatcher
//     tool named after the hub. By convention the hub "setup" prepares a scenario and the hub
//     "evaluate" scores it with an [EvaluationResult];
//   - scenarios ([AddScenario]): named tasks with typed arguments, a prompt template and the
//     setup and evaluate calls they imply, discoverable as MCP prompts and as the resource
//     scenarios://list;
//   - resources ([Server.Resource]) that report live metadata.
//
// [Server.Run] serves stdio by default, or streamable HTTP ([HTTP]) and SSE ([SSE]) for
// development, where read-only endpoints under /proctor describe the server.
//
// envserver imports the standard library and the MCP Go SDK only: the SDK's packages and the
// JSON Schema package its API is expressed in (github.com/google/jsonschema-go), which the SDK
// itself requires. It is a module of its own (github.com/proctorhq/proctor/envserver, whose
// go.mod requires the SDK and nothing of the platform's), so an environment requires this small
// module rather than the platform, and builds from it in its own image.
package envserver
