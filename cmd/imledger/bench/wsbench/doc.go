// Package wsbench is a load client for the WebSocket gateway (imledger bench ws): N clients in
// M groups, of which the first S publish at a set total rate (or in a closed loop, each waiting
// for its ack), for a set time, measuring acks and deliveries; or, idle, they only hold their
// logged-in, subscribed connections. Latencies come from a timestamp each client puts inside the
// content it sends; receivers check that the content arrives byte for byte as it was sent, and
// senders that every ack echoes its pub's frame id. ProcessMonitor samples the server's memory
// and CPU from /proc while it is loaded.
package wsbench
