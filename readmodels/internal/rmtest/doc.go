// Package rmtest builds what the read-model tests share: a provisioned tenant of their own on the
// local MySQL/MariaDB and message events shaped exactly as the write side produces them.
package rmtest
