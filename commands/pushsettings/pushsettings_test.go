package pushsettings_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/pushsettings"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

type fixture struct {
	tenant domain.TenantID
	store  *eventstore.Store
	router *tenantdb.Router
	rows   *pushdb.Store
	h      *pushsettings.Handler
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := testenv.Context(t)
	f := &fixture{tenant: domain.MustTenantID(testenv.UniqueName("pset"))}
	_, f.store = storetest.EventStore(t, 8)
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(f.tenant))
	if err := r.Provision(ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	f.router, f.rows = r, pushdb.New(r)
	if f.h, err = pushsettings.New(pushsettings.Deps{Store: f.store, PreLog: f.rows}); err != nil {
		t.Fatal(err)
	}
	return f
}

// project applies every push event of the tenant to the read model, as the projection does.
func (f *fixture) project(t *testing.T) {
	t.Helper()
	ctx := testenv.Context(t)
	events, err := f.store.ReadAll(ctx, domain.EventFilter{Tenant: f.tenant}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.rows.ApplyBatch(ctx, f.tenant, pushdb.DefaultTables(), events); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) count(t *testing.T, stream string) int {
	t.Helper()
	events, err := f.store.ReadStream(testenv.Context(t), f.tenant, stream, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return len(events)
}

// Of concurrent removals of one device exactly one changes it and one event is appended; the
// others answer unchanged, as does a removal after them.
func TestConcurrentRemovalsChangeOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	dev := pushsettings.RegisterDevice{Tenant: f.tenant, User: 7, DeviceID: "phone", Provider: domain.PushProviderJPush, Token: "reg-1"}
	if changed, err := f.h.RegisterDevice(ctx, dev); err != nil || !changed {
		t.Fatalf("register: %v %v", changed, err)
	}
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		changes int
		errs    []error
	)
	for range n {
		wg.Go(func() {
			changed, err := f.h.RemoveDevice(ctx, pushsettings.RemoveDevice{Tenant: f.tenant, User: 7, DeviceID: "phone"})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if changed {
				changes++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 || changes != 1 {
		t.Fatalf("%d of %d concurrent removals changed the device (errors %v), want 1", changes, n, errs)
	}
	if got := f.count(t, domain.PushDeviceStreamID(7, "phone")); got != 2 {
		t.Fatalf("the device's stream holds %d events, want registered and removed", got)
	}
	f.project(t)
	devs, err := f.rows.Devices(ctx, f.tenant, []domain.UserID{7})
	if err != nil || len(devs[7]) != 0 {
		t.Fatalf("devices of 7 after the removal: %+v %v", devs, err)
	}
}

// Bad input is refused before anything is appended.
func TestBadSettingsAppendNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	cases := []struct {
		name  string
		run   func() (bool, error)
		field string
	}{
		{"bad provider", func() (bool, error) {
			return f.h.RegisterDevice(ctx, pushsettings.RegisterDevice{Tenant: f.tenant, User: 7, DeviceID: "d", Provider: "apns", Token: "t"})
		}, "provider"},
		{"token with NUL", func() (bool, error) {
			return f.h.RegisterDevice(ctx, pushsettings.RegisterDevice{Tenant: f.tenant, User: 7, DeviceID: "d", Provider: "jpush", Token: "a\x00"})
		}, "token"},
		{"device id with a space", func() (bool, error) {
			return f.h.RemoveDevice(ctx, pushsettings.RemoveDevice{Tenant: f.tenant, User: 7, DeviceID: "a b"})
		}, "device_id"},
		{"no user", func() (bool, error) {
			return f.h.SetMuted(ctx, pushsettings.SetMuted{Tenant: f.tenant, Topic: topic(t, "grp1"), Muted: true})
		}, "user_id"},
	}
	for _, c := range cases {
		changed, err := c.run()
		var ve *domain.ValidationError
		if changed || !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v %v, want a validation error of %s", c.name, changed, err, c.field)
		}
	}
	if events, _ := f.store.ReadAll(ctx, domain.EventFilter{Tenant: f.tenant}, 0, 10); len(events) != 0 {
		t.Fatalf("refused changes appended %d events", len(events))
	}
}

// A device and a mute recorded before the settings were events (version-0 rows) are the state
// of their empty streams: the device can be removed and the mute undone, each recorded in the
// log, and muting what is muted changes nothing.
func TestSettingsOlderThanTheLog(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := testenv.Context(t)
	db, err := f.router.DB(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO im_push_devices (user_id, device_id, provider, token, platform, created_at, updated_at) VALUES (9, 'old', 'jpush', 'reg-old', 'ios', NOW(3), NOW(3))",
		"INSERT INTO im_push_mutes (topic, user_id, created_at) VALUES ('grp3', 9, NOW(3))",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	grp3 := topic(t, "grp3")
	steps := []struct {
		name    string
		run     func() (bool, error)
		changed bool
	}{
		{"mute what an old row mutes", func() (bool, error) {
			return f.h.SetMuted(ctx, pushsettings.SetMuted{Tenant: f.tenant, User: 9, Topic: grp3, Muted: true})
		}, false},
		{"unmute it", func() (bool, error) {
			return f.h.SetMuted(ctx, pushsettings.SetMuted{Tenant: f.tenant, User: 9, Topic: grp3})
		}, true},
		{"remove the old device", func() (bool, error) {
			return f.h.RemoveDevice(ctx, pushsettings.RemoveDevice{Tenant: f.tenant, User: 9, DeviceID: "old"})
		}, true},
		{"remove another device never registered", func() (bool, error) {
			return f.h.RemoveDevice(ctx, pushsettings.RemoveDevice{Tenant: f.tenant, User: 9, DeviceID: "never"})
		}, false},
	}
	for _, st := range steps {
		if changed, err := st.run(); err != nil || changed != st.changed {
			t.Fatalf("%s: changed %v (%v), want %v", st.name, changed, err, st.changed)
		}
	}
	f.project(t)
	devs, err := f.rows.Devices(ctx, f.tenant, []domain.UserID{9})
	if err != nil || len(devs[9]) != 0 {
		t.Fatalf("devices of 9: %+v %v", devs, err)
	}
	muted, err := f.rows.MutedUsers(ctx, f.tenant, grp3)
	if err != nil || muted[9] {
		t.Fatalf("muted users of grp3: %v %v", muted, err)
	}
}

func topic(t *testing.T, s string) domain.Topic {
	t.Helper()
	tp, err := domain.ParseTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}
