// Package schemaapi serves the stream contract read-only over HTTP: the JSON Schemas of the
// envelope and of every event type (embedded from domain/schemas) under /v1/schemas/, with an
// index that names each event type's version, category, Kafka topic and, for an old version, the
// version readers upcast it to. The schemas hold nothing secret, so no credentials are asked.
package schemaapi
