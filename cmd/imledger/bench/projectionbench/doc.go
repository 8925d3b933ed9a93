// Package projectionbench measures the projections: BenchLive times the live messages-mysql
// projector from Kafka, BenchRebuild times a rebuild from the event store, SeedMessages fills a
// tenant's history. It is a harness for `imledger bench projection`, kept out of the production
// projections package.
package projectionbench
