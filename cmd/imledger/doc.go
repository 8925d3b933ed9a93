// Command imledger is the one binary of the imledger instant-messaging platform. Subcommands:
//
//	serve             run a node: migrate, relay events to Kafka, project them into the read
//	                  models, serve the REST API, the WebSocket gateway, the chat page and the
//	                  ops endpoints
//	migrate           create the PostgreSQL database if missing and apply the migrations
//	tenant            provision, list, show, suspend and resume tenants; list and revoke API keys
//	token issue       print a signed access token
//	admin             send an admin command over Kafka and wait for its result; make keys
//	replay            rebuild a read model from the event store, or verify it (--verify)
//	export            export events as JSON Lines or Parquet with a resumable cursor
//	republish         re-emit events from the event store to a replay topic
//	schema            list or print the JSON Schemas of the event stream
//	deadletter        list, replay or skip what the projectors and the admin consumer gave up on
//	bench             measure the send path (write), the WebSocket gateway (ws), the projection
//	                  (projection), admin commands (admin), export and republish, offline push
//	                  (push) and user search (search)
//	version           print the build version
//
// docs/operators.md describes every command and its flags.
//
// Configuration comes from defaults, an optional YAML file (--config), IM_* environment variables
// and flags, in that order of precedence (see cmd/imledger/config and docs/operators.md). This
// package is the only place that builds concrete adapters and wires them together.
//
// Files: node.go and the node_*.go files build a node, serve's in dependency order (node.start)
// and the one-shot tools' piece by piece (node_tools.go); bench*.go are the bench subcommands,
// whose harnesses live in cmd/imledger/bench; the other files are the CLI's cobra commands.
package main
