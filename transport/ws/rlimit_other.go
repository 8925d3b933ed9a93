//go:build !unix

package ws

// openFileLimit reports no limit where RLIMIT_NOFILE does not exist.
func openFileLimit() (n int, ok bool) { return 0, false }
