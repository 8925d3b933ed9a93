//go:build !unix

package kafkabroker

// lockDir does nothing where flock does not exist.
func lockDir(string) (func(), error) { return func() {}, nil }
