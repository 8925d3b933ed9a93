package account

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// TestHashingWaitsForASlot fills the only hashing slot and checks that logins and registrations
// wait for it up to HashWait, are then refused as retryable without writing anything, give up
// when their context ends, and go through once the slot is free.
func TestHashingWaitsForASlot(t *testing.T) {
	t.Parallel()
	pool, store := storetest.EventStore(t, 0)
	const wait = 150 * time.Millisecond
	s, err := New(Deps{Pool: pool, Store: store}, Config{
		Password:        passhash.Params{Memory: 1024, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32},
		HashConcurrency: 1,
		HashWait:        wait,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tenant := domain.MustTenantID("acme")
	if _, err := s.Register(ctx, Register{Tenant: tenant, Login: "known", Password: "password1"}); err != nil {
		t.Fatal(err)
	}

	s.hashSlots <- struct{}{} // the one slot is taken
	busy := map[string]func() error{
		"login":           func() error { _, err := s.Login(ctx, tenant, "known", "password1"); return err },
		"unknown login":   func() error { _, err := s.Login(ctx, tenant, "nobody", "password1"); return err },
		"malformed login": func() error { _, err := s.Login(ctx, tenant, "!", "password1"); return err },
		"register": func() error {
			_, err := s.Register(ctx, Register{Tenant: tenant, Login: "newcomer", Password: "password1"})
			return err
		},
	}
	for name, f := range busy {
		start := time.Now()
		err := f()
		if took := time.Since(start); !errors.Is(err, domain.ErrRetryable) || !errors.Is(err, ErrHashingBusy) || took < wait {
			t.Errorf("%s with no free slot: %v after %v, want a retryable ErrHashingBusy after %v", name, err, took, wait)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM credentials WHERE login = 'newcomer'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a registration refused for want of a slot left %d credentials (%v)", n, err)
	}
	// A malformed login reads nothing from PostgreSQL, so the deadline can only end the wait.
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = s.Login(short, tenant, "!", "password1")
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("login whose context ends while waiting: %v, want context.DeadlineExceeded", err)
	}
	// A bad password is refused before any wait.
	if _, err := s.Register(ctx, Register{Tenant: tenant, Login: "newcomer", Password: ""}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("register with an empty password while busy: %v, want a validation error", err)
	}

	<-s.hashSlots // free again
	if uid, err := s.Login(ctx, tenant, "known", "password1"); err != nil || uid == 0 {
		t.Errorf("login with the slot free: %v, %v", uid, err)
	}
	if _, err := s.Login(ctx, tenant, "nobody", "password1"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("unknown login with the slot free: %v, want ErrInvalidCredentials", err)
	}
	if len(s.hashSlots) != 0 {
		t.Errorf("%d hashing slots still held after the calls returned", len(s.hashSlots))
	}
}

func TestHashingConfig(t *testing.T) {
	t.Parallel()
	var c Config
	c.setDefaults()
	if c.HashConcurrency < 1 || c.HashWait <= 0 {
		t.Errorf("defaults: hash_concurrency %d, hash_wait %v", c.HashConcurrency, c.HashWait)
	}
	for _, bad := range []Config{{HashConcurrency: -1}, {HashWait: -time.Second}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", bad)
		}
	}
}
