// Package searchbench measures user search in the business read model: Seed fills a tenant's
// im_users through the business projection's apply path (registrations and profiles, as the
// projector applies them from Kafka), Run times prefix queries. It is the harness of
// `imledger bench search`, kept out of the production packages.
package searchbench
