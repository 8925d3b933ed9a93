// Command imledger is the one binary of the imledger instant-messaging platform. Subcommands:
//
//	serve    run a node: migrate, relay events to Kafka, serve the HTTP API and ops endpoints
//	migrate  create the PostgreSQL database if missing and apply the event store migrations
//	version  print the build version
//
// Configuration comes from defaults, an optional YAML file (--config), IM_* environment variables
// and flags, in that order of precedence (see internal/config and README.md).
package main
