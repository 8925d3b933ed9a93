// Package republish re-emits events from the PostgreSQL event store to a Kafka topic of the
// analyst's choosing, so a stream job can run again from the beginning after Kafka's retention
// dropped the original records. Records are built by the relay's own function (relay.NewMessage):
// same envelope bytes, key and headers as on the live topics. It reads the commit-safe scan
// below a fixed horizon, rate-limits, saves its progress after every acknowledged batch and
// resumes from it, and refuses to write to a live topic.
package republish
