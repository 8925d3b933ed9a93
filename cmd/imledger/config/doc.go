// Package config defines the root configuration of the imledger binary and loads it with koanf:
// built-in defaults, then an optional YAML file, then IM_* environment variables, then command-line
// flags, each layer overriding the one before. Only cmd/imledger calls Load; every other package
// receives its own section by value. It is the composition root's configuration, so it lives
// under cmd/imledger: it names every component's Config, which no package below may do.
package config
