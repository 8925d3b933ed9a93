package relay_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafkabroker"
)

// startBroker starts an embedded broker on addr (a free port when addr ends in :0) with data dir
// dir ("" in memory).
func startBroker(t *testing.T, addr, dir string) *kafkabroker.Broker {
	t.Helper()
	var b *kafkabroker.Broker
	var err error
	for range 50 { // the port of a broker just closed may take a moment to be free
		if b, err = kafkabroker.Start(kafkabroker.Config{Addr: addr, DataDir: dir, Partitions: 4}, nil); err == nil {
			t.Cleanup(b.Close)
			return b
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("start broker on %s: %v", addr, err)
	return nil
}

// An embedded broker that comes back empty (in memory, or a lost data directory) is another
// cluster: the relay republishes every event, so consumers of the new broker miss nothing.
func TestRelayRepublishesToABrokerThatLostItsLog(t *testing.T) {
	t.Parallel()
	b1 := startBroker(t, "127.0.0.1:0", "")
	addr := b1.Addrs()[0]
	e := newEnv(t, b1.Addrs(), true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	first := e.appendEvents(acme, "grp1", domain.EventGroupMessageSent, 10, "")
	r1 := e.newRelay(cfg, nil)
	stop1 := start(t, e.ctx, r1)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events == 10 })
	stop1()
	b1.Close()

	startBroker(t, addr, "") // same address, empty log
	reg := prometheus.NewRegistry()
	r2 := e.newRelay(cfg, reg)
	start(t, e.ctx, r2)
	second := e.appendEvents(acme, "grp1", domain.EventGroupMessageSent, 5, "")
	c := e.collector()
	c.waitFor(e.ctx, append(first, second...), 20*time.Second)
	c.checkStreams(e)
	if n := sumCounter(t, reg, "imledger_relay_republishes_total"); n != 1 {
		t.Errorf("republishes = %v, want 1", n)
	}
}

// A broker that lost the tail of its log (a restored older copy of its data directory, as a
// machine crash before the page cache was flushed leaves it) keeps its cluster id, but its
// partitions end before records it acknowledged: the relay republishes, and nothing is missing.
// A broker that lost nothing is not republished to.
func TestRelayRepublishesWhenPartitionsEndBeforeAcknowledgedRecords(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kafka")
	b := startBroker(t, "127.0.0.1:0", dir)
	addr := b.Addrs()[0]
	e := newEnv(t, b.Addrs(), true)
	acme := domain.MustTenantID("acme")
	cfg := e.fastConfig()
	first := e.appendEvents(acme, "grp1", domain.EventGroupMessageSent, 10, "")
	reg1 := prometheus.NewRegistry()
	r1 := e.newRelay(cfg, reg1)
	stop := start(t, e.ctx, r1)
	waitUntil(t, 20*time.Second, func() bool { return r1.Stats().Events == 10 })
	stop()
	b.Close()
	if err := exec.Command("cp", "-a", dir, dir+".old").Run(); err != nil {
		t.Fatal(err)
	}

	b = startBroker(t, addr, dir)
	reg2 := prometheus.NewRegistry()
	r2 := e.newRelay(cfg, reg2)
	stop = start(t, e.ctx, r2)
	second := e.appendEvents(acme, "grp2", domain.EventGroupMessageSent, 10, "")
	waitUntil(t, 20*time.Second, func() bool { return r2.Stats().Events == 10 })
	stop()
	if n := sumCounter(t, reg2, "imledger_relay_republishes_total"); n != 0 {
		t.Fatalf("the relay republished to a broker that lost nothing (%v times)", n)
	}
	b.Close()

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".old", dir); err != nil {
		t.Fatal(err)
	}
	startBroker(t, addr, dir)
	reg3 := prometheus.NewRegistry()
	r3 := e.newRelay(cfg, reg3)
	start(t, e.ctx, r3)
	c := e.collector()
	c.waitFor(e.ctx, append(first, second...), 20*time.Second)
	c.checkStreams(e)
	if n := sumCounter(t, reg3, "imledger_relay_republishes_total"); n != 1 {
		t.Errorf("republishes = %v, want 1", n)
	}
}
