// Command imledger is the one binary of the imledger instant-messaging platform. Subcommands:
//
//	serve        run a node: migrate, relay events to Kafka, serve the REST API and ops endpoints
//	migrate      create the PostgreSQL database if missing and apply the event store migrations
//	bench write  measure sends/s and latency of the send path, and the relay's events/s
//	version      print the build version
//
// Configuration comes from defaults, an optional YAML file (--config), IM_* environment variables
// and flags, in that order of precedence (see internal/config and README.md). This package is the
// only place that builds concrete adapters and wires them together.
package main
