// Command imledger is the one binary of the imledger instant-messaging platform. Subcommands:
//
//	serve             run a node: migrate, relay events to Kafka, project them into the read
//	                  models, serve the REST API, the WebSocket gateway, the chat page and the
//	                  ops endpoints
//	migrate           create the PostgreSQL database if missing and apply the migrations
//	tenant create     provision a tenant's MySQL database and print a tenant API key
//	token issue       print a signed access token
//	replay            rebuild a read model from the event store, or verify it (--verify)
//	deadletter        list, replay or skip the events the projectors gave up on
//	bench write       measure the send path and the relay
//	bench ws          measure the WebSocket gateway (in-process node or --url)
//	bench projection  measure the messages-mysql projection, live and rebuilt
//	version           print the build version
//
// Configuration comes from defaults, an optional YAML file (--config), IM_* environment variables
// and flags, in that order of precedence (see cmd/imledger/config and docs/operators.md). This package is the
// only place that builds concrete adapters and wires them together.
package main
