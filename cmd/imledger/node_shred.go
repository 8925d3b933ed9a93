package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/shred"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/userchan"
)

// openKeyring builds the data-key keyring over the node's pool (DESIGN §7a). The tenant key
// comes from shred.keeper_url, else the local keeper with shred.local_key. Without either, a
// node with real Kafka brokers configured refuses to start (every node must wrap with the same
// key); otherwise (the embedded broker, the tools, the benchmarks) the key is the one kept in
// the event store's shred_local_key for trying imledger, made on first use.
func (n *node) openKeyring(ctx context.Context) error {
	c := n.cfg.Shred
	url := string(c.KeeperURL)
	if url == "" && c.LocalKey != "" {
		u, err := shred.LocalKeeperURL(string(c.LocalKey))
		if err != nil {
			return err
		}
		url = u
	}
	if url == "" {
		if n.broker == nil && !n.cfg.Kafka.UseEmbedded() && n.schema != checkSchema {
			return errors.New("shred.local_key: required when Kafka brokers are configured and shred.keeper_url is empty; " +
				"every node must share the same 32-byte key in base64 (IM_SHRED_LOCAL_KEY), and it must be backed up")
		}
		key, err := n.trialKey(ctx)
		if err != nil {
			return err
		}
		url = "base64key://" + key
	}
	keepers, err := shred.NewURLKeepers(url)
	if err != nil {
		return err
	}
	n.keepers = keepers
	n.keys, err = shred.New(n.pool, keepers, c.Config)
	return err
}

// trialKey returns the local keeper's key kept in shred_local_key, in URL base64, making it
// unless the node only reads (the tools, which then get a key of their own that opens nothing
// sealed before).
func (n *node) trialKey(ctx context.Context) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	fresh := base64.URLEncoding.EncodeToString(b)
	if n.schema != checkSchema {
		if _, err := n.pool.Exec(ctx, `INSERT INTO shred_local_key (key) VALUES ($1) ON CONFLICT DO NOTHING`, fresh); err != nil {
			return "", fmt.Errorf("shred: keep the local key: %w", err)
		}
	}
	var key string
	err := n.pool.QueryRow(ctx, `SELECT key FROM shred_local_key`).Scan(&key)
	if errors.Is(err, pgx.ErrNoRows) {
		n.log.Warn("no shred key configured and none kept: data keys are wrapped with a key that dies with this process")
		return fresh, nil
	}
	if err != nil {
		return "", fmt.Errorf("shred: read the local key: %w", err)
	}
	n.log.Warn("no shred.keeper_url or shred.local_key configured: data keys are wrapped with a key kept in the event store, for trying imledger only")
	return key, nil
}

// sealer is what the write side seals with: the keyring, or nil when shred.enabled is false.
func (n *node) sealer() domain.Sealer {
	if !n.cfg.Shred.Enabled || n.keys == nil {
		return nil
	}
	return n.keys
}

// opener is what every reader of events opens sealed values with; it is the keyring whether
// sealing is on or not, so what was sealed before still reads.
func (n *node) opener() domain.Opener {
	if n.keys == nil {
		return nil
	}
	return n.keys
}

// sealKeys seals and opens: file names for the file records, the seeded events of bench
// projection; nil when sealing is off.
func (n *node) sealKeys() interface {
	domain.Sealer
	domain.Opener
} {
	if n.sealer() == nil {
		return nil
	}
	return n.keys
}

// keyDestroyer destroys a user's data keys on erasure; nil without a keyring.
func (n *node) keyDestroyer() account.KeyDestroyer {
	if n.keys == nil {
		return nil
	}
	return n.keys
}

// erasingNotifier tells the node's notifier about every governance change and, after an
// erasure, replaces the erased user's message content kept in the users' channel logs in Redis
// (short-lived delivery state, which no projection rebuilds). Best effort: a failure is logged,
// and the logs expire within channel.log_ttl all the same.
type erasingNotifier struct {
	account.Notifier
	channel *userchan.Channel
	log     *slog.Logger
}

// AccountChanged implements account.Notifier.
func (e erasingNotifier) AccountChanged(ctx context.Context, st account.Status, change account.Change) {
	if e.Notifier != nil {
		e.Notifier.AccountChanged(ctx, st, change)
	}
	if change != account.ChangeErased || e.channel == nil {
		return
	}
	if _, err := e.channel.Log().EraseUser(ctx, st.Tenant, st.User); err != nil {
		e.log.Warn("erase the user's channel log items", "tenant_id", st.Tenant.String(), "err", err)
	}
}

// forgetErased is the node's fanout deliverer that, when an account change says a user was
// erased (on this node or another), makes the keyring forget the user's keys before the change
// goes on: every node stops using the destroyed keys when the change reaches it, and within
// shred.cache_ttl when that message is lost.
type forgetErased struct {
	next fanout.Deliverer
	keys *shred.Keyring
}

// Deliver implements fanout.Deliverer.
func (f forgetErased) Deliver(m *fanout.Message) {
	if m.Kind == fanout.KindAccount && m.Account != nil && m.Account.What == string(account.ChangeErased) && f.keys != nil {
		f.keys.Forget(m.Tenant, m.Account.User)
	}
	f.next.Deliver(m)
}
