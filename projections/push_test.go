package projections_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/replay"
)

// pushHistory is user 5's push settings: a device registered, replaced and removed, another
// registered, a conversation muted, another muted and unmuted.
func pushHistory(tn domain.TenantID) []domain.Envelope {
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	dev := func(id string, v int64, token string) domain.Envelope {
		return projtest.MustEnvelope(tn, domain.PushDeviceStreamID(5, id), v, domain.EventPushDeviceRegistered, domain.PushDeviceRegistered{
			User: 5, DeviceID: id, Provider: domain.PushProviderJPush, Token: token, Platform: "ios", RegisteredAt: t0.Add(time.Duration(v) * time.Minute)})
	}
	mute := func(topic string, v int64, muted bool) domain.Envelope {
		tp, err := domain.ParseTopic(topic)
		if err != nil {
			panic(err)
		}
		if muted {
			return projtest.MustEnvelope(tn, domain.PushMuteStreamID(5, tp), v, domain.EventPushConversationMuted,
				domain.PushConversationMuted{User: 5, Topic: topic, MutedAt: t0})
		}
		return projtest.MustEnvelope(tn, domain.PushMuteStreamID(5, tp), v, domain.EventPushConversationUnmuted,
			domain.PushConversationUnmuted{User: 5, Topic: topic, UnmutedAt: t0.Add(time.Minute)})
	}
	return []domain.Envelope{
		dev("a", 1, "reg-a1"), dev("a", 2, "reg-a2"),
		projtest.MustEnvelope(tn, domain.PushDeviceStreamID(5, "a"), 3, domain.EventPushDeviceRemoved,
			domain.PushDeviceRemoved{User: 5, DeviceID: "a", RemovedAt: t0.Add(5 * time.Minute)}),
		dev("b", 1, "reg-b1"),
		mute("grp1", 1, true), mute("grp2", 1, true), mute("grp2", 2, false),
	}
}

// TestPushSettingsProjectAndRebuild: the push-settings projection folds the push events from
// im.business.event (a removed device and an unmuted conversation are gone for the push worker);
// verify finds no difference, names im_push_devices after a token is changed by hand, and a
// rebuild restores it; a row older than the log is carried over by the rebuild and the
// verification.
func TestPushSettingsProjectAndRebuild(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("pushsettings")
	store := projtest.NewEventStore(t, h.Pool)
	rows := pushdb.New(m.Router)
	history := projtest.AppendAll(t, store, pushHistory(tn))
	p := projections.PushSettings(rows, "")
	if p.ConsumerGroup != projections.GroupPushSettings || p.Topics[0] != "im.business.event" || p.Accept(domain.EventGroupCreated) {
		t.Fatalf("projection %+v", p)
	}
	h.Run(h.Config(), p)
	h.Publish(history...)
	grp1, _ := domain.ParseTopic("grp1")
	grp2, _ := domain.ParseTopic("grp2")
	projtest.Eventually(t, 30*time.Second, func() error {
		devs, err := rows.Devices(projtest.Ctx(t), tn, []domain.UserID{5})
		if err != nil || len(devs[5]) != 1 || devs[5][0].DeviceID != "b" || devs[5][0].Token != "reg-b1" {
			return fmt.Errorf("devices of 5: %+v %v", devs, err)
		}
		m1, _ := rows.MutedUsers(projtest.Ctx(t), tn, grp1)
		m2, _ := rows.MutedUsers(projtest.Ctx(t), tn, grp2)
		if !m1[5] || m2[5] {
			return fmt.Errorf("muted grp1 %v grp2 %v", m1, m2)
		}
		return nil
	})
	rb, err := replay.NewPushRebuilder(rows, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	verify := func() (replay.Verification[readmodels.TableSummary], string) {
		t.Helper()
		res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res.Report(&out, rb.Projection())
		return res, out.String()
	}
	if res, out := verify(); !res.OK() || res.Events != int64(len(history)) || res.Live["im_push_devices"].Rows != 2 {
		t.Fatalf("verify of the projected settings: %+v\n%s", res, out)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "UPDATE im_push_devices SET token = 'forged' WHERE device_id = 'b'"); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); res.OK() || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_push_devices" ||
		strings.Contains(out, "forged") || strings.Contains(out, "reg-b1") {
		t.Fatalf("verify after a token was changed by hand: %+v\n%s", res, out)
	}
	// A device registered before the settings were events.
	if _, err := db.ExecContext(projtest.Ctx(t), "INSERT INTO im_push_devices (user_id, device_id, provider, token, platform, created_at, updated_at)"+
		" VALUES (6, 'old', 'webhook', 'https://example.com/6', '', NOW(3), NOW(3))"); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if res, out := verify(); !res.OK() {
		t.Fatalf("verify after the rebuild: %+v\n%s", res, out)
	}
	devs, err := rows.Devices(projtest.Ctx(t), tn, []domain.UserID{5, 6})
	if err != nil || len(devs[5]) != 1 || devs[5][0].Token != "reg-b1" || len(devs[6]) != 1 {
		t.Fatalf("devices after the rebuild: %+v %v", devs, err)
	}
}
