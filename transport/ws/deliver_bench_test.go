package ws

import (
	"net"
	"runtime"
	"strconv"
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
// With "channel" every member is also on its user's channel watching the topic, as bench ws
// --channel has them: what the per-user channel adds to a message's delivery when every
// recipient has the topic open.
func BenchmarkDeliverToGroup(b *testing.B) {
	b.Run("writer-goroutines", func(b *testing.B) { benchDeliver(b, false, false) })
	b.Run("direct-writes", func(b *testing.B) { benchDeliver(b, true, false) })
	b.Run("direct-writes,channel", func(b *testing.B) { benchDeliver(b, true, true) })
}

func benchDeliver(b *testing.B, rawWrites, channel bool) {
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
		s.user, s.tenant = domain.UserID(i+1), tenant
		sessions = append(sessions, s)
		h.topics[k][s] = s.user
		if channel {
			h.addUser(s, tenant, s.user, time.Now(), "")
			h.channelOn(s, []domain.Topic{topic}, nil)
		}
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

// BenchmarkChannelFrames measures what the per-user channel adds, in the hub, to the delivery of
// a message of a group whose members (5, as bench ws --group-size 5, or 500) all have the topic
// open and are on their channel: the look-up of the topic's channel sessions and the check that
// each is subscribed, which sends nothing. Pure CPU, no socket.
func BenchmarkChannelFrames(b *testing.B) {
	for _, members := range []int{5, 500} {
		b.Run(strconv.Itoa(members), func(b *testing.B) {
			h := NewHub()
			tenant := domain.MustTenantID("acme")
			topic, _ := domain.ParseTopic("grp1")
			k := hubKey{tenant, topic.String()}
			h.topics[k] = map[*session]domain.UserID{}
			for i := range members {
				s := &session{user: domain.UserID(i + 1), tenant: tenant}
				h.topics[k][s] = s.user
				h.addUser(s, tenant, s.user, time.Now(), "")
				h.channelOn(s, []domain.Topic{topic}, nil)
			}
			msg := &fanout.Message{Kind: fanout.KindData, Tenant: tenant, Topic: topic, From: 1, Seq: 1, TS: time.Now(), Content: []byte(`"x"`)}
			d := delivery{key: k, msg: msg}
			sent := 0
			b.ResetTimer()
			for range b.N {
				h.mu.RLock()
				h.deliverChannels(d, func(*session, []byte) { sent++ })
				h.mu.RUnlock()
			}
			if sent != 0 {
				b.Fatalf("%d channel frames to subscribed sessions", sent)
			}
		})
	}
}
