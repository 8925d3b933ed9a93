// Package query answers the read-side questions transport asks: a topic's history by seq, and a
// user's unread counts. It reads the Redis hot cache when that can answer exactly and MySQL
// otherwise; with Redis down every answer comes from MySQL (DESIGN §7).
package query
