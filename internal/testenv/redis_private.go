package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis is a redis-server of one test on its own loopback port, so a test can stop it (a
// Redis outage) without touching the shared server. It is stopped at cleanup.
type PrivateRedis struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// StartPrivateRedis starts redis-server without persistence on a free loopback port and waits
// until it answers. It fails the test, naming what to install, when redis-server is missing.
func StartPrivateRedis(t testing.TB) *PrivateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (%v): install Redis (apt-get install redis-server) for tests that stop their own Redis", err)
	}
	r := &PrivateRedis{t: t, port: freePort(t)}
	t.Cleanup(r.Stop)
	r.start()
	return r
}

// Restart stops the server and starts an empty one on the same port (a Redis restart without
// persistence), and waits until it answers.
func (r *PrivateRedis) Restart() {
	r.t.Helper()
	r.Stop()
	r.start()
}

func (r *PrivateRedis) start() {
	t := r.t
	t.Helper()
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("private redis-server on %s did not answer: %v", r.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addr is the server's host:port.
func (r *PrivateRedis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// Stop kills the server and waits for it to exit; calling it again does nothing.
func (r *PrivateRedis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}
