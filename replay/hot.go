package replay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
)

// HotVerifyStore is what verifying messages-hot needs of readmodels/hot: a scratch copy under
// another prefix, the comparison, and the removal of the copy.
type HotVerifyStore interface {
	projections.HotStore
	Prefix() string
	WithPrefix(prefix string) (*hot.Store, error)
	Compare(ctx context.Context, tenant domain.TenantID, check *hot.Store, topics []string, users []domain.UserID, now time.Time, margin time.Duration) ([]hot.Diff, error)
	TenantKeys(ctx context.Context, tenant domain.TenantID) (topics []string, users []domain.UserID, err error)
}

// HotRebuilder rebuilds and verifies messages-hot, the read model the hot store keeps in Redis,
// with the same pass over the log as the Rebuilder's: Redis knows no tables to swap, so a rebuild
// applies the log again in place (the hot store is idempotent) and a verification fills a scratch
// copy under a prefix of its own. It is safe for concurrent use.
type HotRebuilder struct {
	store   projections.HotStore
	events  EventReader
	tenants TenantDatabases
	log     *slog.Logger
}

// NewHotRebuilder checks its arguments; log nil discards. Pass events through ExpiringEvents to
// read them under each tenant's retention horizon, as the live projector does.
func NewHotRebuilder(store projections.HotStore, events EventReader, tenants TenantDatabases, log *slog.Logger) (*HotRebuilder, error) {
	if store == nil || events == nil || tenants == nil {
		return nil, errors.New("projections: rebuild: messages-hot needs a hot store, an event reader and tenant databases")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &HotRebuilder{store: store, events: events, tenants: tenants, log: log.With("component", "rebuild")}, nil
}

// Rebuild applies every message event of o.Tenant (or of every tenant with a database, as
// Rebuilder.Rebuild finds them) to Redis again in position order, o.BatchSize events at a time;
// the hot store is idempotent, so this repairs missing or stale keys and changes nothing else.
// Every event read counts as applied. o.Projection is ignored.
func (r *HotRebuilder) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	o.Projection = projections.ProjectionMessagesHot
	return rebuildTenants(ctx, r.tenants, o, r.log, r.rebuildTenant)
}

func (r *HotRebuilder) rebuildTenant(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	bar, err := o.Progress.count(ctx, r.events, MessageFilter(t), "rebuild hot "+t.String())
	if err != nil {
		return TenantRebuild{}, err
	}
	f, err := pass(ctx, r.events, MessageFilter(t), 0, o.BatchSize, bar, nil, func(page []domain.Envelope) (int, error) {
		_, err := r.store.ApplyBatch(ctx, t, page)
		return len(page), err
	})
	finish(bar)
	return TenantRebuild{Tenant: t, Events: f.read, Applied: f.applied, Duration: time.Since(start)}, err
}

// HotVerifyResult is the outcome of HotRebuilder.Verify.
type HotVerifyResult struct {
	Tenant domain.TenantID
	Events int64 // message events replayed into the scratch copy
	Topics int   // topics compared
	Users  int   // users whose read marks were compared
	Diffs  []hot.Diff
}

// OK reports whether the live hot read model matched the log.
func (v HotVerifyResult) OK() bool { return len(v.Diffs) == 0 }

// DiffTopics returns the topics that differ, sorted and each once.
func (v HotVerifyResult) DiffTopics() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range v.Diffs {
		if !seen[d.Topic] {
			seen[d.Topic] = true
			out = append(out, d.Topic)
		}
	}
	sort.Strings(out)
	return out
}

// hotVerifyMargin leaves out of the comparison the messages that leave the hot window within this
// long of the verification, since the live keys and the scratch copy may straddle their expiry.
const hotVerifyMargin = time.Minute

// Verify checks o.Tenant's messages-hot read model in Redis against the event log: it applies
// every message event of the tenant, in position order, to a scratch copy of the read model under
// a prefix of its own (the live prefix followed by "verify-<random>:", which no tenant's keys can
// start with), compares the live keys with the copy topic by topic (hot.Store.Compare: the hot
// window's seqs and snapshots, last seqs, read marks), writes the differences to o.Out naming
// each topic, and deletes the copy. The topics and users compared are those of the log and
// those that have live keys (hot.Store.TenantKeys, a SCAN of the keyspace), so live keys of a
// topic the log does not hold are reported too. Events the live projector has not applied yet
// show up as differences, as for the MySQL read models. The store must be a HotVerifyStore.
func (r *HotRebuilder) Verify(ctx context.Context, o VerifyOptions) (HotVerifyResult, error) {
	if o.Tenant.IsZero() {
		return HotVerifyResult{}, errors.New("projections: verify: tenant is required")
	}
	live, ok := r.store.(HotVerifyStore)
	if !ok {
		return HotVerifyResult{}, errors.New("projections: verify: messages-hot needs a hot store that can be compared")
	}
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	check, err := live.WithPrefix(live.Prefix() + "verify-" + hex.EncodeToString(tag) + ":")
	if err != nil {
		return HotVerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	defer func() { _, _ = check.DropTenant(context.WithoutCancel(ctx), o.Tenant) }()
	res, err := r.verify(ctx, live, check, o)
	if err != nil {
		return res, err
	}
	if o.Out != nil {
		res.Report(o.Out)
	}
	return res, nil
}

// verify fills check with the log of o.Tenant and compares live with it.
func (r *HotRebuilder) verify(ctx context.Context, live HotVerifyStore, check *hot.Store, o VerifyOptions) (HotVerifyResult, error) {
	ro := RebuildOptions{BatchSize: o.BatchSize, Progress: o.Progress}
	ro.setDefaults()
	bar, err := o.Progress.count(ctx, r.events, MessageFilter(o.Tenant), "verify hot "+o.Tenant.String())
	if err != nil {
		return HotVerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	topics, users := map[string]bool{}, map[domain.UserID]bool{}
	f, err := pass(ctx, r.events, MessageFilter(o.Tenant), 0, ro.BatchSize, bar, nil, func(page []domain.Envelope) (int, error) {
		if _, err := check.ApplyBatch(ctx, o.Tenant, page); err != nil {
			return 0, err
		}
		for _, e := range page {
			t, us := hot.Touches(e)
			if t != "" {
				topics[t] = true
			}
			for _, u := range us {
				users[u] = true
			}
		}
		return len(page), nil
	})
	finish(bar)
	res := HotVerifyResult{Tenant: o.Tenant, Events: f.read}
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	// The live keys of topics and users the log never mentions are differences too.
	liveTopics, liveUsers, err := live.TenantKeys(ctx, o.Tenant)
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	topicList, userList := sortedSet(topics, liveTopics), sortedSet(users, liveUsers)
	res.Topics, res.Users = len(topicList), len(userList)
	if res.Diffs, err = live.Compare(ctx, o.Tenant, check, topicList, userList, time.Now(), hotVerifyMargin); err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	return res, nil
}

// sortedSet returns the members of set and more, each once, in ascending order.
func sortedSet[K string | domain.UserID](set map[K]bool, more []K) []K {
	for _, k := range more {
		set[k] = true
	}
	out := make([]K, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Report writes the outcome to out as `imledger replay --verify` prints it: one line with the
// topics and users compared and the events replayed, and one more line per difference.
func (v HotVerifyResult) Report(out io.Writer) {
	if v.OK() {
		fmt.Fprintf(out, "tenant %s: %s matches the log in %d topics and %d users' read marks (%d events)\n",
			v.Tenant, projections.ProjectionMessagesHot, v.Topics, v.Users, v.Events)
		return
	}
	fmt.Fprintf(out, "tenant %s: %s differs from the log in %d of %d topics (%d events)\n", v.Tenant, projections.ProjectionMessagesHot,
		len(v.DiffTopics()), v.Topics, v.Events)
	for _, d := range v.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
}
