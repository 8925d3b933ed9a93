package projections

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
)

// HotVerifyStore is what verifying messages-hot needs of readmodels/hot: a scratch copy under
// another prefix, the comparison, and the removal of the copy.
type HotVerifyStore interface {
	HotStore
	Prefix() string
	WithPrefix(prefix string) (*hot.Store, error)
	Compare(ctx context.Context, tenant domain.TenantID, check *hot.Store, topics []string, users []domain.UserID, now time.Time, margin time.Duration) ([]hot.Diff, error)
	TenantKeys(ctx context.Context, tenant domain.TenantID) (topics []string, users []domain.UserID, err error)
}

// HotVerifyResult is the outcome of Rebuilder.VerifyHot.
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

// VerifyHot checks o.Tenant's messages-hot read model in Redis against the event log: it applies
// every message event of the tenant, in position order, to a scratch copy of the read model under
// a prefix of its own (the live prefix followed by "verify-<random>:", which no tenant's keys can
// start with), compares the live keys with the copy topic by topic (hot.Store.Compare: the hot
// window's seqs and snapshots, last seqs, read marks), writes the differences to o.Out naming
// each topic, and deletes the copy. The topics and users compared are those of the log and
// those that have live keys (hot.Store.TenantKeys, a SCAN of the keyspace), so live keys of a
// topic the log does not hold are reported too. Events the live projector has not applied yet
// show up as differences, as for the MySQL read models.
func (r *Rebuilder) VerifyHot(ctx context.Context, o VerifyOptions) (HotVerifyResult, error) {
	if o.Tenant.IsZero() {
		return HotVerifyResult{}, errors.New("projections: verify: tenant is required")
	}
	live, ok := r.d.Hot.(HotVerifyStore)
	if !ok || r.d.Hot == nil {
		return HotVerifyResult{}, errors.New("projections: verify: messages-hot needs a hot store that can be compared")
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	check, err := live.WithPrefix(live.Prefix() + "verify-" + hex.EncodeToString(tag) + ":")
	if err != nil {
		return HotVerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	defer func() { _, _ = check.DropTenant(context.WithoutCancel(ctx), o.Tenant) }()

	ro := RebuildOptions{BatchSize: o.BatchSize, Progress: o.Progress}
	ro.setDefaults()
	total, err := r.d.Events.Count(ctx, MessageFilter(o.Tenant))
	if err != nil {
		return HotVerifyResult{}, fmt.Errorf("projections: verify: count events: %w", err)
	}
	bar := o.Progress.start("verify hot "+o.Tenant.String(), total)
	topics, users := map[string]bool{}, map[domain.UserID]bool{}
	res := HotVerifyResult{Tenant: o.Tenant}
	err = readPages(ctx, r.d.Events, MessageFilter(o.Tenant), 0, ro.BatchSize, func(page []domain.Envelope) error {
		if _, err := check.ApplyBatch(ctx, o.Tenant, page); err != nil {
			return err
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
		res.Events += int64(len(page))
		if bar != nil {
			_ = bar.Add(len(page))
		}
		return nil
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	// The live keys of topics and users the log never mentions are differences too.
	liveTopics, liveUsers, err := live.TenantKeys(ctx, o.Tenant)
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	for _, t := range liveTopics {
		topics[t] = true
	}
	for _, u := range liveUsers {
		users[u] = true
	}
	topicList := make([]string, 0, len(topics))
	for t := range topics {
		topicList = append(topicList, t)
	}
	sort.Strings(topicList)
	userList := make([]domain.UserID, 0, len(users))
	for u := range users {
		userList = append(userList, u)
	}
	sort.Slice(userList, func(i, j int) bool { return userList[i] < userList[j] })
	res.Topics, res.Users = len(topicList), len(userList)
	if res.Diffs, err = live.Compare(ctx, o.Tenant, check, topicList, userList, time.Now(), hotVerifyMargin); err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	if res.OK() {
		fmt.Fprintf(out, "tenant %s: %s matches the log in %d topics and %d users' read marks (%d events)\n",
			o.Tenant, ProjectionMessagesHot, res.Topics, res.Users, res.Events)
		return res, nil
	}
	fmt.Fprintf(out, "tenant %s: %s differs from the log in %d of %d topics (%d events)\n", o.Tenant, ProjectionMessagesHot,
		len(res.DiffTopics()), res.Topics, res.Events)
	for _, d := range res.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
	return res, nil
}
