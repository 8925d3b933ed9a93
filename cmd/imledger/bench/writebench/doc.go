// Package writebench measures the write path: BenchWrite drives the send handler with many
// senders over many group topics and reports throughput and latency percentiles. It is the
// harness of `imledger bench write`, kept out of the production message package (commands/message).
package writebench
