// Package testenv gives integration tests their own isolated slice of the real services on this
// machine: a fresh PostgreSQL database, a fresh MySQL/MariaDB database, a unique Redis key prefix
// and an embedded Kafka-protocol broker. A missing service fails the test with the command that
// starts it; tests are never skipped for it.
package testenv
