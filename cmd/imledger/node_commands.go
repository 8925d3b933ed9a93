package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/transport/auth"
)

// startCommands builds the token signer and the command side: the send policy with its cache
// and its cross-node invalidation, the group, relation and profile handlers, the send handler,
// the message operations and the accounts.
func (n *node) startCommands(ctx context.Context) (err error) {
	if n.signer, err = n.newSigner(); err != nil {
		return err
	}
	if n.loader, err = group.NewLoader(n.store, n.cfg.SendPolicy.Cache); err != nil {
		return fmt.Errorf("send_policy.cache: %w", err)
	}
	inval := redisInvalidation{rdb: n.rdb, channel: n.cfg.InvalidationChannel(), node: n.cfg.NodeID}
	if n.policy, err = policy.New(policy.Deps{Loader: n.loader, Source: inval,
		Logger: n.log.With("component", "send_policy")}, n.cfg.SendPolicy); err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "send policy", n.policy.Run))
	notifier, err := n.newRealtimeNotifier()
	if err != nil {
		return err
	}
	if n.groups, err = group.New(group.Deps{Store: n.store,
		Invalidator: policy.Broadcaster{Local: n.policy, Remote: inval, Logger: n.log.With("component", "groups")},
		Notifier:    notifier,
		Changes:     nodeChannel{n},
		Sealer:      n.sealer(),
	}, n.cfg.Groups); err != nil {
		return err
	}
	if n.send, err = n.newSendHandler(ctx, n.policy); err != nil {
		return err
	}
	if n.ops, err = commands.NewMessageOpsHandler(commands.MessageOpsDeps{Store: n.store, Listener: nodeCommits{n}, Reads: nodeChannel{n}, Policy: n.policy, Sealer: n.sealer(),
		Logger: n.log.With("component", "message_ops")}, n.cfg.MessageOps); err != nil {
		return fmt.Errorf("message_ops: %w", err)
	}
	return n.newAccounts()
}

// newAccounts builds the account service over the event store.
func (n *node) newAccounts() (err error) {
	n.accounts, err = account.New(account.Deps{Pool: n.pool, Store: n.store, Sealer: n.sealer(), Logger: n.log.With("component", "account")}, n.cfg.Account)
	return err
}

// newSigner builds the token signer from auth.keys. Without keys it generates a random key when
// Kafka is embedded (the local demo: tokens then die with the process, and other processes cannot
// verify them) and refuses to start otherwise.
func (n *node) newSigner() (*auth.Signer, error) {
	acfg := n.cfg.Auth
	if len(acfg.Keys) == 0 {
		if n.broker == nil {
			return nil, errors.New("auth.keys: required when Kafka brokers are configured; every node must share the same keys " +
				"(IM_AUTH_KEYS=id=secret; compose.yaml builds it from IM_AUTH_SECRET)")
		}
		k, err := randomKey()
		if err != nil {
			return nil, err
		}
		acfg.Keys = config.KeyList{k}
		acfg.SigningKeyID = k.ID
		n.log.Warn("no auth.keys configured: signing tokens with a random key that dies with this process, for trying imledger only",
			"key_id", k.ID)
	}
	return auth.NewSigner(acfg.Signer())
}

// randomKey returns a signing key of 48 random bytes.
func randomKey() (auth.Key, error) {
	var id [4]byte
	var secret [48]byte
	if _, err := rand.Read(id[:]); err != nil {
		return auth.Key{}, fmt.Errorf("random signing key: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return auth.Key{}, fmt.Errorf("random signing key: %w", err)
	}
	return auth.Key{ID: "demo-" + hex.EncodeToString(id[:]), Secret: base64.RawStdEncoding.EncodeToString(secret[:])}, nil
}
