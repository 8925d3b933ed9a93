// Package projtest holds what the tests of the projections and of their rebuilds (package replay)
// stand on: an isolated Kafka, PostgreSQL, MySQL and Redis environment (the local services and the
// embedded broker, each test under names of its own), an event store to append a history to, and
// builders of the events of that history. It is test support; production code never imports it.
package projtest
