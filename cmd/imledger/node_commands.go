package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/ratelimit"
	"github.com/imledger/imledger/transport/ws"
)

// startPolicy builds the token signer and the send policy with its cache of folded states and
// its cross-node invalidation: what the fanout's deliverer, the read policy and the handlers
// check against.
func (n *node) startPolicy(ctx context.Context) (err error) {
	if n.signer, err = n.newSigner(); err != nil {
		return err
	}
	if n.loader, err = group.NewLoader(n.store, n.cfg.SendPolicy.Cache); err != nil {
		return fmt.Errorf("send_policy.cache: %w", err)
	}
	if n.policy, err = policy.New(policy.Deps{Loader: n.loader, Source: n.invalidation(),
		Logger: n.log.With("component", "send_policy")}, n.cfg.SendPolicy); err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "send policy", n.policy.Run))
	return nil
}

// invalidation carries the send policy's invalidation keys between the nodes over Redis.
func (n *node) invalidation() redisInvalidation {
	return redisInvalidation{rdb: n.rdb, channel: n.cfg.InvalidationChannel(), node: n.cfg.NodeID}
}

// startCommands builds the command side over the send policy and what the handlers hand their
// commits to (handlerSinks: the fanout, the users' channel logs and the offline push, running by
// now): the group, relation and profile handlers, the send handler with the send limits for REST
// and WebSocket, the message operations and the accounts.
func (n *node) startCommands(ctx context.Context) (err error) {
	sinks, err := n.handlerSinks()
	if err != nil {
		return err
	}
	if n.groups, err = group.New(group.Deps{Store: n.store,
		Invalidator: policy.Broadcaster{Local: n.policy, Remote: n.invalidation(), Logger: n.log.With("component", "groups")},
		Notifier:    sinks.groups,
		Changes:     sinks.changes,
		Sealer:      n.sealer(),
	}, n.cfg.Groups); err != nil {
		return err
	}
	files, err := n.fileAccess()
	if err != nil {
		return err
	}
	if n.send, err = n.newSendHandler(ctx, n.policy, files, sinks.commits); err != nil {
		return err
	}
	n.state.sender = n.send
	if n.state.limiter != nil {
		n.state.sender = ratelimit.LimitSends(n.send, n.state.limiter)
	}
	if n.ops, err = message.NewMessageOpsHandler(message.MessageOpsDeps{Store: n.store, Listener: sinks.changed, Reads: sinks.reads,
		Policy: n.policy, Sealer: n.sealer(), Logger: n.log.With("component", "message_ops")}, n.cfg.MessageOps); err != nil {
		return fmt.Errorf("message_ops: %w", err)
	}
	return n.newAccounts()
}

// handlerSinks are what the command handlers hand their commits to. Each is a concrete part of
// the node, running before the handlers are built; all are nil on a node that runs no fanout
// (bench write), whose handlers deliver nothing.
type handlerSinks struct {
	groups  group.Notifier         // the realtime effects of group changes (ws.Notifier over the fanout)
	changes group.ChangeListener   // group changes on the users' channels
	commits message.CommitListener // sent messages: the fanout, the users' channels, offline push
	changed message.ChangeListener // recalls and edits: the fanout
	reads   message.ReadListener   // read marks: the users' channels
}

// handlerSinks builds the handlers' sinks over the node's fanout, channel logs and push producer
// (nil when push is off); none without a fanout.
func (n *node) handlerSinks() (handlerSinks, error) {
	if n.fanout == nil {
		return handlerSinks{}, nil
	}
	// ws.Notifier gives every committed group change its realtime effects over the fanout, so a
	// removed member, a dissolved group's members and a blocked peer lose their subscriptions on
	// every node at once and the topics' online members hear of each change.
	notifier, err := ws.NewNotifier(n.fanout, n.log.With("component", "realtime"))
	if err != nil {
		return handlerSinks{}, err
	}
	// The channel and the push producer queue: neither a new 1:1 chat's item nor an offline
	// reminder holds the sequencer.
	commits := commitListeners{fanout.Commits{Publisher: n.fanout}, n.channel}
	if n.pf.producer != nil {
		commits = append(commits, n.pf.producer)
	}
	return handlerSinks{groups: notifier, changes: n.channel, commits: commits,
		changed: fanout.Commits{Publisher: n.fanout}, reads: n.channel}, nil
}

// commitListeners hands every committed message to each listener in turn.
type commitListeners []message.CommitListener

var _ message.CommitListener = commitListeners(nil)

// MessagesCommitted implements message.CommitListener.
func (ls commitListeners) MessagesCommitted(ctx context.Context, msgs []message.CommittedMessage) {
	for _, l := range ls {
		l.MessagesCommitted(ctx, msgs)
	}
}

// fileAccess is who may reference which file in a send's head.files: the file records of the
// tenant databases under the read policy. A node without MySQL has no file records and refuses
// every head.files.
func (n *node) fileAccess() (message.FileAccess, error) {
	if n.router == nil {
		return message.NoFiles{}, nil
	}
	a, err := files.NewAccess(filedb.New(n.router), n.readPolicy())
	if err != nil {
		return nil, err
	}
	return a, nil
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
