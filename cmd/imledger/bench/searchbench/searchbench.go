package searchbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// Store is the business read model the benchmark writes and searches (*business.Store).
type Store interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables business.Tables, events []domain.Envelope) (business.ApplyResult, error)
	SearchUsers(ctx context.Context, tenant domain.TenantID, q business.UserSearch) ([]business.UserHit, string, error)
	Counts(ctx context.Context, tenant domain.TenantID, tables business.Tables) (business.TableCounts, error)
}

// Options configure Seed and Run. Zero fields take the defaults named.
type Options struct {
	Store  Store           // required
	Tenant domain.TenantID // required; provisioned
	// Users is how many users the tenant has after Seed: user ids 1..Users. Default 100,000.
	Users int
	// Batch is how many users one apply transaction writes (two events each). Default 1,000.
	Batch int
	// Workers apply batches at once. Default 4.
	Workers int
	// Queries is how many searches Run makes of each kind (nickname, login). Default 2,000.
	Queries int
	// Concurrency is how many searches run at once. Default 4.
	Concurrency int
	// Limit is each search's page size. Default 20.
	Limit int
	// Out receives progress and the results; nil discards.
	Out io.Writer
}

func (o *Options) setDefaults() {
	if o.Users == 0 {
		o.Users = 100_000
	}
	if o.Batch == 0 {
		o.Batch = 1000
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Queries == 0 {
		o.Queries = 2000
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.Limit == 0 {
		o.Limit = business.DefaultSearchLimit
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// Validate reports every invalid option at once, with defaults applied.
func (o Options) Validate() error {
	o.setDefaults()
	var errs []error
	if o.Store == nil || o.Tenant.IsZero() {
		errs = append(errs, errors.New("searchbench: a store and a tenant are required"))
	}
	if o.Users < 1 || o.Batch < 1 || o.Workers < 1 || o.Queries < 1 || o.Concurrency < 1 || o.Limit < 1 {
		errs = append(errs, errors.New("searchbench: users, batch, workers, queries, concurrency and limit must be positive"))
	}
	return errors.Join(errs...)
}

// syllables make nicknames that share prefixes the way names do, in several cases and scripts.
var syllables = []string{"al", "an", "be", "ca", "da", "el", "fa", "ga", "ha", "io", "ja", "ka", "li", "ma", "na",
	"o", "pa", "qu", "ra", "sa", "ta", "u", "va", "wa", "xi", "ya", "za", "é", "ñ", "李", "王", "张", "Ö", "ø"}

// Nickname is user id's nickname: two to four syllables, capitalised for some, deterministic.
func Nickname(id int64) string {
	r := rand.New(rand.NewPCG(uint64(id), 7))
	var b strings.Builder
	for i := range 2 + r.IntN(3) {
		s := syllables[r.IntN(len(syllables))]
		if i == 0 && r.IntN(2) == 0 {
			rs := []rune(s)
			s = strings.ToUpper(string(rs[:1])) + string(rs[1:])
		}
		b.WriteString(s)
	}
	return b.String()
}

// Login is user id's login name.
func Login(id int64) string {
	r := rand.New(rand.NewPCG(uint64(id), 11))
	return fmt.Sprintf("%s%s%d", syllables[r.IntN(15)], syllables[r.IntN(15)], id)
}

// Seed gives the tenant users 1..Users that it lacks (it counts im_users first), each a
// user.registered.v1 and a user.profile_updated.v1 applied through the business projection's
// apply path, Batch users a transaction, Workers transactions at once; one in twenty opts out of
// search. It returns how many users it wrote.
func Seed(ctx context.Context, o Options) (int, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return 0, err
	}
	counts, err := o.Store.Counts(ctx, o.Tenant, business.DefaultTables())
	if err != nil {
		return 0, err
	}
	first := int(counts.Users) + 1
	if first > o.Users {
		return 0, nil
	}
	jobs := make(chan int)
	errc := make(chan error, o.Workers)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range jobs {
				if err := seedBatch(ctx, o, start, min(start+o.Batch, o.Users+1)); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	for start := first; start <= o.Users; start += o.Batch {
		select {
		case jobs <- start:
		case err := <-errc:
			close(jobs)
			wg.Wait()
			return 0, err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return 0, err
	default:
	}
	return o.Users - first + 1, nil
}

// seedBatch applies the users [from, to) in one transaction.
func seedBatch(ctx context.Context, o Options, from, to int) error {
	now := time.Now().UTC()
	events := make([]domain.Envelope, 0, 3*(to-from))
	for id := int64(from); id < int64(to); id++ {
		u := domain.UserID(id)
		login, err := domain.NewLogin(Login(id))
		if err != nil {
			return err
		}
		profile, err := domain.NewUserProfile(Nickname(id), "", "")
		if err != nil {
			return err
		}
		pending, err := domain.Register(o.Tenant, u, login, profile, now)
		if err != nil {
			return err
		}
		if id%20 == 0 {
			no := false
			pending = append(pending, domain.PendingEvent{StreamID: domain.ProfileStreamID(u), Type: domain.EventUserDiscoverableSet,
				Payload: &domain.UserDiscoverableSet{User: u, Discoverable: no, SetAt: now}})
		}
		envs, err := domain.NewEnvelopes(o.Tenant, domain.Actor{Type: domain.ActorSystem, ID: "bench-search"}, pending)
		if err != nil {
			return err
		}
		events = append(events, envs...)
	}
	if _, err := o.Store.ApplyBatch(ctx, o.Tenant, "bench-search", business.DefaultTables(), events); err != nil {
		return fmt.Errorf("seed users %d-%d: %w", from, to-1, err)
	}
	return nil
}

// Result is one kind of search's latencies.
type Result struct {
	By            business.SearchBy
	Queries       int
	Hits          int // users found over all queries
	P50, P99, Max time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("%-8s %6d queries, %5.1f users a page on average: p50 %s  p99 %s  max %s", r.By, r.Queries,
		float64(r.Hits)/float64(max(r.Queries, 1)), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond))
}

// Run makes Queries searches by nickname and Queries by login, Concurrency at once, each a first
// page of a prefix of one to three characters taken from a random user's nickname or login
// (the way people type), searched for by another random user, and returns the latencies.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	var out []Result
	for _, by := range []business.SearchBy{business.SearchByNickname, business.SearchByLogin} {
		r, err := runKind(ctx, o, by)
		if err != nil {
			return nil, err
		}
		fmt.Fprintln(o.Out, r)
		out = append(out, r)
	}
	return out, nil
}

func runKind(ctx context.Context, o Options, by business.SearchBy) (Result, error) {
	jobs := make(chan int)
	var (
		mu    sync.Mutex
		lat   []time.Duration
		hits  int
		first error
		wg    sync.WaitGroup
	)
	for w := range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(len(by))))
			for range jobs {
				q := business.UserSearch{Searcher: domain.UserID(1 + r.IntN(o.Users)), By: by, Limit: o.Limit,
					Prefix: prefixOf(r, by, int64(1+r.IntN(o.Users)))}
				start := time.Now()
				found, _, err := o.Store.SearchUsers(ctx, o.Tenant, q)
				took := time.Since(start)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				lat, hits = append(lat, took), hits+len(found)
				mu.Unlock()
			}
		}()
	}
	for i := range o.Queries {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if first != nil {
		return Result{}, first
	}
	slices.Sort(lat)
	at := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return Result{By: by, Queries: len(lat), Hits: hits, P50: at(0.50), P99: at(0.99), Max: lat[len(lat)-1]}, nil
}

// prefixOf is the first one to three characters of user id's nickname or login.
func prefixOf(r *rand.Rand, by business.SearchBy, id int64) string {
	s := Nickname(id)
	if by == business.SearchByLogin {
		s = Login(id)
	}
	runes := []rune(s)
	return string(runes[:min(len(runes), 1+r.IntN(3))])
}
