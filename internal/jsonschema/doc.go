// Package jsonschema checks JSON documents against the part of JSON Schema draft 2020-12 that
// imledger's checked-in schemas use (domain/schemas): type, properties, required,
// additionalProperties, items, enum, const, minimum, pattern and the formats date-time and uuid.
// Tests use it to hold exports and Kafka records to the published stream contract without a
// third-party validator; a keyword it does not know is an error, never silently passed.
package jsonschema
