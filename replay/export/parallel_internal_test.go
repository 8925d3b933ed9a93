package export

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// cancelAfterScan is the event store, with ctrl-C pressed as soon as the first stretch is read.
type cancelAfterScan struct {
	*eventstore.Store
	cancel context.CancelFunc
}

func (c cancelAfterScan) ScanCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter, page int, fn func([]eventstore.Record) error) error {
	err := c.Store.ScanCommitted(ctx, r, f, page, fn)
	c.cancel()
	return err
}

// A parallel scan stopped between two stretches is an error, not a scan that ended: the export
// must not commit a cursor past the stretches it never read.
func TestParallelScanStoppedBetweenStretchesFails(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	_, store := storetest.EventStore(t, 8)
	tenant := domain.MustTenantID("acme")
	for seq := int64(1); seq <= 20; seq++ {
		env, err := domain.NewEnvelope(tenant, "grp1", seq, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"},
			domain.MessageSent{MessageID: "m" + strconv.FormatInt(seq, 10), Topic: "grp1", Seq: seq, From: 1,
				ClientMsgID: "c" + strconv.FormatInt(seq, 10), MsgType: domain.MsgText, Content: json.RawMessage(`"x"`), SentAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, tenant, "grp1", seq-1, []domain.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	rng := eventstore.Range{}
	f := eventstore.Filter{Tenant: tenant}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h, err := store.Horizon(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rng.Horizon = h
		if n, err := store.CountCommitted(ctx, rng, f); err != nil {
			t.Fatal(err)
		} else if n == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the events stayed above the commit horizon for 30 s")
		}
	}
	scanCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := cancelAfterScan{Store: store, cancel: cancel}
	got := 0
	// One reader: the stretch after the first is only started once the first was handed on, by
	// which time the scan was stopped.
	err := scanParallel(scanCtx, r, r, rng, f, 5, 1, 10, func(recs []eventstore.Record) error {
		got += len(recs)
		return nil
	})
	if err == nil && got != 20 {
		t.Fatalf("a stopped scan handed on %d of 20 events and reported no error", got)
	}
}
