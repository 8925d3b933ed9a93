package business_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// register decides a registration with a first profile, as the account service does.
func (w *world) register(u domain.UserID, login, nickname string) []domain.Envelope {
	w.t.Helper()
	l := must[domain.Login](w.t)(domain.NewLogin(login))
	var prof domain.UserProfile
	if nickname != "" {
		prof = must[domain.UserProfile](w.t)(domain.NewUserProfile(nickname, "", ""))
	}
	ev, err := domain.Register(w.tenant, u, l, prof, now())
	return w.decide(u, ev, err)
}

// discoverable decides u's choice to be found or not.
func (w *world) discoverable(u domain.UserID, yes bool) []domain.Envelope {
	w.t.Helper()
	ev, err := w.profile(u).Patch(w.p(u), domain.ProfilePatch{Discoverable: &yes}, now())
	return w.decide(u, ev, err)
}

// searchAll pages through a user search and returns the ids found, failing on a repeat.
func searchAll(t *testing.T, f *fixture, q business.UserSearch) []domain.UserID {
	t.Helper()
	ctx := testCtx(t)
	var out []domain.UserID
	for page := 0; ; page++ {
		hits, next, err := f.store.SearchUsers(ctx, f.tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			if slices.Contains(out, h.ID) {
				t.Fatalf("user %d found twice (page %d)", h.ID, page)
			}
			out = append(out, h.ID)
		}
		if next == "" {
			return out
		}
		q.Cursor = next
	}
}

// TestSearchUsersByPrefix checks user search: nickname prefixes regardless of case and accents,
// login prefixes folded as logins are, LIKE wildcards taken literally, users who opted out or
// block the searcher left out, users the searcher blocks found and flagged, a registration without
// a profile left out, and paging through many equal nicknames that returns each user once.
func TestSearchUsersByPrefix(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	const me domain.UserID = 1
	var evs []domain.Envelope
	for _, u := range []struct {
		id          domain.UserID
		login, nick string
	}{
		{me, "searcher", "Me"}, {2, "alice", "Alice"}, {3, "alvaro", "Álvaro"}, {4, "al_x", "al_x"}, {5, "albert", "Albert"},
		{6, "alex", "Alex"}, {7, "alan", "Alan"}, {8, "nobody", "Alina"}, {9, "pending", ""},
	} {
		evs = append(evs, w.register(u.id, u.login, u.nick)...)
	}
	evs = append(evs, concat(w.discoverable(5, false), w.block(6, me), w.block(me, 7))...)
	for i := range 12 {
		nick := []string{"bob", "Bob", "BOB"}[i%3]
		evs = append(evs, w.register(domain.UserID(100+i), fmt.Sprintf("bob%02d", i), nick)...)
	}
	f.apply(ctx, t, evs...)

	for _, c := range []struct {
		name string
		by   business.SearchBy
		q    string
		want []domain.UserID
	}{
		{"nickname, any case and accent", business.SearchByNickname, "al", []domain.UserID{4, 7, 2, 8, 3}},
		{"nickname, accented prefix", business.SearchByNickname, "ÁL", []domain.UserID{4, 7, 2, 8, 3}},
		{"nickname, _ is not a wildcard", business.SearchByNickname, "al_", []domain.UserID{4}},
		{"nickname, % is not a wildcard", business.SearchByNickname, "%", nil},
		{"login, folded", business.SearchByLogin, "AL", []domain.UserID{4, 7, 2, 3}},
		{"login, exact", business.SearchByLogin, "alice", []domain.UserID{2}},
		{"login, a character no login has", business.SearchByLogin, "ál", nil},
		{"registration without a profile", business.SearchByLogin, "pend", nil},
	} {
		got := searchAll(t, f, business.UserSearch{Searcher: me, By: c.by, Prefix: c.q, Limit: 2})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s (%q): %v, want %v", c.name, c.q, got, c.want)
		}
	}
	hits, _, err := f.store.SearchUsers(ctx, f.tenant, business.UserSearch{Searcher: me, By: business.SearchByLogin, Prefix: "alan"})
	if err != nil || len(hits) != 1 || !hits[0].BlockedBySearcher || hits[0].Login != "alan" || hits[0].Nickname != "Alan" {
		t.Errorf("a user the searcher blocks: %+v %v", hits, err)
	}
	// Another searcher, whom user 6 does not block, finds 6 and not flagged.
	if got := searchAll(t, f, business.UserSearch{Searcher: 2, Prefix: "alex"}); !slices.Equal(got, []domain.UserID{6}) {
		t.Errorf("6 for another searcher: %v", got)
	}
	bobs := searchAll(t, f, business.UserSearch{Searcher: me, Prefix: "bo", Limit: 5})
	if len(bobs) != 12 {
		t.Errorf("paging through 12 equal nicknames found %d: %v", len(bobs), bobs)
	}
	// Opting in again finds the user again.
	f.apply(ctx, t, w.discoverable(5, true)...)
	if got := searchAll(t, f, business.UserSearch{Searcher: me, Prefix: "albert"}); !slices.Equal(got, []domain.UserID{5}) {
		t.Errorf("after opting in: %v", got)
	}
	if _, err := f.store.User(ctx, f.tenant, 9); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("the profile of a registration without one: %v", err)
	}

	for _, c := range []struct {
		name  string
		q     business.UserSearch
		field string
	}{
		{"no prefix", business.UserSearch{Searcher: me}, "q"},
		{"control character", business.UserSearch{Searcher: me, Prefix: "a\nb"}, "q"},
		{"too long", business.UserSearch{Searcher: me, Prefix: string(make([]byte, 65))}, "q"},
		{"unknown field", business.UserSearch{Searcher: me, Prefix: "a", By: "email"}, "by"},
		{"bad cursor", business.UserSearch{Searcher: me, Prefix: "a", Cursor: "x"}, "cursor"},
		{"negative limit", business.UserSearch{Searcher: me, Prefix: "a", Limit: -1}, "limit"},
	} {
		var ve *domain.ValidationError
		if _, _, err := f.store.SearchUsers(ctx, f.tenant, c.q); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("%s: %v, want a validation error of %s", c.name, err, c.field)
		}
	}
}

// TestSearchGroupsFindsDiscoverableGroupsByName checks group search: only discoverable groups
// that are not dissolved, by name prefix regardless of case, in name order, paged.
func TestSearchGroupsFindsDiscoverableGroupsByName(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	public := domain.DefaultGroupSettings()
	public.Discoverable = true
	var evs []domain.Envelope
	for i, name := range []string{"GoClub", "gonuts", "Gophers", "golf", "GoingAway"} {
		g := domain.GroupID(10 + i)
		evs = append(evs, w.create(g, 1, name)...)
		if name != "golf" {
			evs = append(evs, w.settings(g, 1, public)...)
		}
	}
	evs = append(evs, w.dissolve(14, 1)...)
	f.apply(ctx, t, evs...)
	var got []string
	q := business.GroupSearch{Prefix: "GO", Limit: 2}
	for {
		hits, next, err := f.store.SearchGroups(ctx, f.tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			got = append(got, h.Name)
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if want := []string{"GoClub", "gonuts", "Gophers"}; !slices.Equal(got, want) {
		t.Errorf("groups found %q, want %q (golf is not discoverable, GoingAway is dissolved)", got, want)
	}
	s, err := f.store.Settings(ctx, f.tenant, 10)
	if err != nil || !s.Discoverable {
		t.Errorf("settings of a discoverable group: %+v %v", s, err)
	}
}

// TestUsersByIDReadsManyProfilesInOrder checks the batch profile read: the order asked, each id
// once, unknown users and registrations without a profile left out, and its bounds.
func TestUsersByIDReadsManyProfilesInOrder(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	f.apply(ctx, t, concat(w.register(1, "one", "One"), w.register(2, "two", "Two"), w.register(3, "three", ""))...)
	users, err := f.store.UsersByID(ctx, f.tenant, []domain.UserID{2, 99, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Nickname)
	}
	if !slices.Equal(names, []string{"Two", "One"}) {
		t.Errorf("users %q", names)
	}
	var ve *domain.ValidationError
	if _, err := f.store.UsersByID(ctx, f.tenant, make([]domain.UserID, business.MaxUsersByID+1)); !errors.As(err, &ve) || ve.Reason != "too_many" {
		t.Errorf("too many ids: %v", err)
	}
	if _, err := f.store.UsersByID(ctx, f.tenant, []domain.UserID{0}); !errors.As(err, &ve) || ve.Reason != "bad_format" {
		t.Errorf("a bad id: %v", err)
	}
}
