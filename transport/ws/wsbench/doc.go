// Package wsbench is a load client for the WebSocket gateway (imledger bench ws): N clients in
// M groups publish at a set total rate for a set time and measure acks and deliveries. Latencies
// come from a timestamp each client puts inside the content it sends.
package wsbench
