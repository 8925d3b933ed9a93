package ws

import (
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// BenchmarkDeliverToGroup delivers messages to the local sessions of one topic over loopback
// TCP, one message at a time: each is read by every member before the next goes, as in the
// bench's one sender to 500 online members. It reports the process's CPU time per delivery
// (server and reading clients together), which load on the machine disturbs less than time.
func BenchmarkDeliverToGroup(b *testing.B) {
	b.Run("writer-goroutines", func(b *testing.B) { benchDeliver(b, false) })
	b.Run("direct-writes", func(b *testing.B) { benchDeliver(b, true) })
}

func benchDeliver(b *testing.B, rawWrites bool) {
	const members = 500
	g := testGateway(b)
	h := NewHub()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	tenant := domain.MustTenantID("acme")
	topic, _ := domain.ParseTopic("grp1")
	k := hubKey{tenant, topic.String()}
	h.topics[k] = map[*session]domain.UserID{}
	var received, target atomic.Int64
	done := make(chan struct{}, 1)
	var sessions []*session
	for i := range members {
		s, cc := loopbackSession(b, g, ln, rawWrites)
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := cc.Read(buf)
				total := received.Add(int64(n))
				if t := target.Load(); t > 0 && total >= t && target.CompareAndSwap(t, 0) {
					done <- struct{}{}
				}
				if err != nil {
					return
				}
			}
		}()
		s.user = domain.UserID(i + 1)
		sessions = append(sessions, s)
		h.topics[k][s] = s.user
	}
	defer func() {
		for _, s := range sessions {
			s.kill(closeGone)
		}
	}()
	msg := &fanout.Message{Kind: fanout.KindData, Tenant: tenant, Topic: topic, From: 1, Seq: 1, MessageID: "m",
		TS: time.Unix(1700000000, 0), Content: []byte(`"a message of a typical size, about sixty bytes long....."`)}
	frame := encodeMessage(msg)
	per := int64(len(wireFrame(frame)))
	runtime.GC()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := range b.N {
		msg.Seq = int64(i%9 + 1) // same length
		target.Store(int64(i+1) * members * per)
		if received.Load() >= int64(i+1)*members*per {
			b.Fatal("more bytes than frames")
		}
		h.Deliver(msg)
		<-done
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*members), "cpu-ns/delivery")
	b.ReportMetric(float64(b.N*members)/b.Elapsed().Seconds(), "deliveries/s")
}
