// Package rest serves imledger's HTTP API under /v1/im with huma v2 on a net/http ServeMux and
// publishes its OpenAPI 3.1 document at /openapi.json. Every answer, success or error, is the
// envelope {code, data, reason, message, details, request_id, server_time}; MapError is the one
// place that turns errors into HTTP statuses and stable reasons.
package rest
