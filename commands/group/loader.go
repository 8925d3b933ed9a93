package group

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/imledger/imledger/domain"
)

// StreamReader is what a Loader needs from the event store. *eventstore.Store satisfies it.
type StreamReader interface {
	// ReadStream returns up to limit events of the stream above afterVersion, in version order.
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
}

// Loader folds group, membership, relation and profile streams into their domain states and
// keeps the folded states in a size-bounded in-process cache keyed by tenant and stream, so a
// later load of the same stream reads only the events appended since (a group stream grows by
// one event per join; it is folded from the start once per process, then caught up).
//
// Every load takes a maxAge. With maxAge 0 the load always reads the store (from the cached
// version on) and returns the state as of a read that began after the call: what command
// handlers need. With maxAge > 0 a cached state is returned without any I/O when the read that
// last confirmed it began less than maxAge ago and the key was not invalidated since: what the
// send-path policy needs. Concurrent cached loads of one key share one read. A state in steady
// use is read again in the background shortly before it expires (see aheadAge), so the
// send path rarely waits for the store.
//
// Invalidate and InvalidateAll mark states stale; an invalidation that crosses a read in
// progress makes that read's result stale too, so a state read before a commit is never taken
// as fresh after the commit's invalidation. A Loader is safe for concurrent use.
type Loader struct {
	store StreamReader
	cfg   LoaderConfig
	cache *stateCache
	epoch time.Time
	ahead chan struct{} // one token per background read in progress

	confirms confirmQueue // read-ahead confirmations waiting for their batch (StreamConfirmer)

	hits, reads, aheadReads atomic.Int64
}

// A cached load answered from a state older than refreshAheadNum/refreshAheadDen (three
// quarters) of its maxAge also starts a background read of the stream, so a state in steady use
// is confirmed again before it expires and its loads never wait for the store. At most
// maxReadsAhead such reads run at once; an aging state that finds none free is read when it
// expires, as without them.
const (
	refreshAheadNum, refreshAheadDen = 3, 4
	maxReadsAhead                    = 4
)

// aheadAge is the age from which a state loaded with maxAge is read again in the background.
func aheadAge(maxAge time.Duration) time.Duration {
	return maxAge * refreshAheadNum / refreshAheadDen
}

var _ Invalidator = (*Loader)(nil)

// NewLoader returns a Loader over store. It fails when store is nil or cfg is invalid after
// defaults are applied.
func NewLoader(store StreamReader, cfg LoaderConfig) (*Loader, error) {
	cfg.setDefaults()
	var errs []error
	if store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("group loader: %w", err)
	}
	return &Loader{store: store, cfg: cfg, cache: newStateCache(cfg.MaxEntries, cfg.Shards), epoch: time.Now(),
		ahead: make(chan struct{}, maxReadsAhead)}, nil
}

// LoaderStats counts a Loader's work since it was created.
type LoaderStats struct {
	Hits  int64 // cached loads answered without I/O
	Reads int64 // loads that read the store (each may take several pages), background reads included
	Ahead int64 // background reads started for states about to expire
}

// Stats returns the counters.
func (l *Loader) Stats() LoaderStats {
	return LoaderStats{Hits: l.hits.Load(), Reads: l.reads.Load(), Ahead: l.aheadReads.Load()}
}

// clock returns the loader's monotonic time.
func (l *Loader) clock() time.Duration { return time.Since(l.epoch) }

// Group returns the state of group id in tenant; a group never created has Exists() false.
// Errors: *domain.ValidationError for a bad id, domain.ErrRetryable when the store failed,
// domain.ErrStreamMismatch when the stream does not fold (a bug or corruption).
func (l *Loader) Group(ctx context.Context, tenant domain.TenantID, id domain.GroupID, maxAge time.Duration) (domain.GroupState, error) {
	return load(ctx, l, tenant, groupKey(tenant, id), maxAge, func() (string, domain.GroupState, error) {
		s, err := domain.NewGroupState(tenant, id)
		return domain.GroupStreamID(id), s, err
	})
}

// Membership returns the membership of user in group (status none when the stream is empty).
// Errors as Group.
func (l *Loader) Membership(ctx context.Context, tenant domain.TenantID, group domain.GroupID, user domain.UserID, maxAge time.Duration) (domain.MembershipState, error) {
	return load(ctx, l, tenant, memberKey(tenant, group, user), maxAge, func() (string, domain.MembershipState, error) {
		s, err := domain.NewMembershipState(tenant, group, user)
		return domain.MembershipStreamID(group, user), s, err
	})
}

// Relation returns the relation of two distinct users. Errors as Group.
func (l *Loader) Relation(ctx context.Context, tenant domain.TenantID, a, b domain.UserID, maxAge time.Duration) (domain.RelationState, error) {
	return load(ctx, l, tenant, relationKey(tenant, a, b), maxAge, func() (string, domain.RelationState, error) {
		s, err := domain.NewRelationState(tenant, a, b)
		return s.StreamID(), s, err
	})
}

// Profile returns the public profile state of user. Errors as Group.
func (l *Loader) Profile(ctx context.Context, tenant domain.TenantID, user domain.UserID, maxAge time.Duration) (domain.ProfileState, error) {
	return load(ctx, l, tenant, profileKey(tenant, user), maxAge, func() (string, domain.ProfileState, error) {
		s, err := domain.NewProfileState(tenant, user)
		return domain.ProfileStreamID(user), s, err
	})
}

// Invalidate marks the cached states of the streams stale: the next cached load of each reads
// the store first. It implements Invalidator and never blocks on I/O.
func (l *Loader) Invalidate(_ context.Context, tenant domain.TenantID, streamIDs []string) {
	for _, id := range streamIDs {
		key, ok := keyOfStream(tenant, id)
		if !ok {
			continue
		}
		s := l.cache.shard(key)
		s.mu.Lock()
		s.invalidate(key)
		s.mu.Unlock()
	}
}

// InvalidateAll marks every cached state stale, for when invalidations may have been missed
// (a subscription to other nodes' invalidations was down).
func (l *Loader) InvalidateAll() {
	for _, s := range l.cache.shards {
		s.mu.Lock()
		s.invalidateAll()
		s.mu.Unlock()
	}
}

// observe folds events this process just committed into the cached states that are exactly one
// version behind them, so the next load finds nothing new to read. Freshness marks are left as
// they are: the committed events only make a state newer than what its mark promises.
func (l *Loader) observe(tenant domain.TenantID, envs []domain.Envelope) {
	for i := 0; i < len(envs); {
		j := i + 1
		for j < len(envs) && envs[j].StreamID == envs[i].StreamID {
			j++
		}
		if key, ok := keyOfStream(tenant, envs[i].StreamID); ok {
			l.observeStream(key, envs[i:j])
		}
		i = j
	}
}

func (l *Loader) observeStream(key stateKey, envs []domain.Envelope) {
	s := l.cache.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.items[key]
	if e == nil || e.state == nil || e.version != envs[0].StreamVersion-1 {
		return
	}
	next, err := applyAny(e.state, envs)
	if err != nil {
		s.remove(key)
		return
	}
	e.state, e.version = next, envs[len(envs)-1].StreamVersion
}

// foldable is a pointer to a domain state that folds events.
type foldable[S any] interface {
	*S
	Apply(domain.Envelope) error
	Version() int64
}

// load returns the state of one stream as Loader describes. empty returns the stream id and
// the state before the stream's first event; it is called only when the store must be read.
func load[S any, P foldable[S]](ctx context.Context, l *Loader, tenant domain.TenantID, key stateKey, maxAge time.Duration, empty func() (string, S, error)) (S, error) {
	var zero S
	if tenant.IsZero() {
		return zero, &domain.ValidationError{Field: "tenant_id", Reason: "required"}
	}
	sh := l.cache.shard(key)
	if maxAge > 0 {
		if st, ok, aging := hit[S](l, sh, key, maxAge); ok {
			if aging != nil {
				// A load that takes states of aheadAge as expired reads, aging's state included.
				read := func(ctx context.Context) { _, _ = load[S, P](ctx, l, tenant, key, aheadAge(maxAge), empty) }
				if _, ok := l.store.(StreamConfirmer); ok {
					stream, _, _ := empty()
					l.confirmAhead(confirmReq{sh: sh, key: key, e: aging, tenant: tenant, stream: stream, maxAge: maxAge, fallback: read})
				} else {
					l.readAhead(aging, maxAge, read)
				}
			}
			return st, nil
		}
	}
	for {
		start := readStart{at: l.clock()}
		sh.mu.Lock()
		e := sh.items[key]
		if e != nil && e.state != nil && maxAge > 0 && !e.stale && start.at-e.verified < maxAge {
			st := e.state.(S)
			sh.mu.Unlock()
			l.hits.Add(1)
			return st, nil
		}
		start.shardGen = sh.gen
		var (
			base    S
			hasBase bool
		)
		if e != nil {
			start.entry, start.entryGen = e, e.gen
			if e.state != nil {
				base, hasBase = e.state.(S), true
			}
		}
		var f *flight
		if maxAge > 0 {
			if other := sh.flights[key]; other != nil && other.shard == sh.gen {
				sh.mu.Unlock()
				st, err, retry := awaitFlight[S](ctx, other)
				if retry {
					continue
				}
				return st, err
			}
			f = &flight{done: make(chan struct{}), shard: sh.gen}
			sh.flights[key] = f
		}
		sh.mu.Unlock()

		st, err := readState[S, P](ctx, l, tenant, base, hasBase, empty)
		sh.mu.Lock()
		if err == nil {
			sh.store(key, st, P(&st).Version(), start)
		}
		if f != nil {
			if sh.flights[key] == f {
				delete(sh.flights, key)
			}
			f.state, f.err = st, err
			close(f.done)
		}
		sh.mu.Unlock()
		return st, err
	}
}

// hit answers a cached load under the read lock when the cached state is fresh enough. When the
// state is past three quarters of maxAge and no background read of it runs, aging is its entry,
// marked as being read: the caller starts that read.
func hit[S any](l *Loader, sh *cacheShard, key stateKey, maxAge time.Duration) (st S, ok bool, aging *cacheEntry) {
	now := l.clock()
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	e := sh.items[key]
	if e == nil || e.state == nil || e.stale || now-e.verified >= maxAge {
		return st, false, nil
	}
	if !e.used.Load() {
		e.used.Store(true)
	}
	l.hits.Add(1)
	if now-e.verified >= aheadAge(maxAge) && e.readingAhead.CompareAndSwap(false, true) {
		aging = e
	}
	return e.state.(S), true, aging
}

// readAhead runs read, a load of e's key that reads the store, in the background, bounded by
// maxAge; it does nothing when maxReadsAhead reads already run.
func (l *Loader) readAhead(e *cacheEntry, maxAge time.Duration, read func(context.Context)) {
	select {
	case l.ahead <- struct{}{}:
	default:
		e.readingAhead.Store(false)
		return
	}
	l.aheadReads.Add(1)
	go func() {
		defer func() {
			e.readingAhead.Store(false)
			<-l.ahead
		}()
		ctx, cancel := context.WithTimeout(context.Background(), maxAge)
		defer cancel()
		read(ctx)
	}()
}

// awaitFlight waits for another load's read. retry is true when that read ended with its own
// caller's cancellation while ctx is still live: the waiter then reads for itself.
func awaitFlight[S any](ctx context.Context, f *flight) (st S, err error, retry bool) {
	select {
	case <-ctx.Done():
		return st, ctx.Err(), false
	case <-f.done:
	}
	if f.err != nil {
		if ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) {
			return st, nil, true
		}
		return st, f.err, false
	}
	return f.state.(S), nil, false
}

// readState catches base up with the store, or folds the stream from the start without a base.
// A cached base that does not fold (it should not happen) is dropped and the stream refolded.
func readState[S any, P foldable[S]](ctx context.Context, l *Loader, tenant domain.TenantID, base S, hasBase bool, empty func() (string, S, error)) (S, error) {
	l.reads.Add(1)
	stream, st, err := empty()
	if err != nil {
		return st, err
	}
	if hasBase {
		caught, err := catchUp[S, P](ctx, l, tenant, stream, base)
		if !errors.Is(err, domain.ErrStreamMismatch) {
			return caught, err
		}
	}
	return catchUp[S, P](ctx, l, tenant, stream, st)
}

// catchUp applies the stream's events above st's version, page by page.
func catchUp[S any, P foldable[S]](ctx context.Context, l *Loader, tenant domain.TenantID, stream string, st S) (S, error) {
	for {
		evs, err := l.store.ReadStream(ctx, tenant, stream, P(&st).Version(), l.cfg.ReadPage)
		if err != nil {
			return st, retryable("read "+stream, err)
		}
		for _, e := range evs {
			if err := P(&st).Apply(e); err != nil {
				return st, fmt.Errorf("fold %s: %w", stream, err)
			}
		}
		if len(evs) < l.cfg.ReadPage {
			return st, nil
		}
	}
}

// applyAny folds envs into a cached state of any of the four aggregate types.
func applyAny(state any, envs []domain.Envelope) (any, error) {
	switch s := state.(type) {
	case domain.GroupState:
		return applyAll(s, envs)
	case domain.MembershipState:
		return applyAll(s, envs)
	case domain.RelationState:
		return applyAll(s, envs)
	case domain.ProfileState:
		return applyAll(s, envs)
	}
	return nil, fmt.Errorf("%w: cached state %T", domain.ErrStreamMismatch, state)
}

func applyAll[S any, P foldable[S]](s S, envs []domain.Envelope) (S, error) {
	for _, e := range envs {
		if err := P(&s).Apply(e); err != nil {
			return s, err
		}
	}
	return s, nil
}
