package domain_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/imledger/imledger/domain"
)

func TestParseGroupID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]domain.GroupID{"123": 123, "grp123": 123, "9223372036854775807": 9223372036854775807} {
		if got, err := domain.ParseGroupID(in); err != nil || got != want {
			t.Errorf("ParseGroupID(%q) = %d, %v", in, got, err)
		}
	}
	bad := map[string]string{"": "required", "0": "bad_format", "-4": "bad_format", "abc": "bad_format",
		"grp": "bad_format", "12a": "bad_format", "9223372036854775808": "bad_format", "grp-1": "bad_format",
		strings.Repeat("1", 40): "bad_format"}
	for in, reason := range bad {
		_, err := domain.ParseGroupID(in)
		var v *domain.ValidationError
		if !errors.As(err, &v) || v.Field != "group_id" || v.Reason != reason {
			t.Errorf("ParseGroupID(%q) err = %v, want group_id %s", in, err, reason)
		}
	}
	if _, err := domain.NewGroupID(0); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("NewGroupID(0) err = %v", err)
	}
	id := domain.GroupID(77)
	b, _ := json.Marshal(struct {
		G domain.GroupID `json:"g"`
	}{id})
	if string(b) != `{"g":"77"}` {
		t.Errorf("GroupID JSON = %s", b)
	}
	var back struct {
		G domain.GroupID `json:"g"`
	}
	if err := json.Unmarshal([]byte(`{"g":"grp77"}`), &back); err != nil || back.G != id {
		t.Errorf("unmarshal grp77 = %d, %v", back.G, err)
	}
	if err := json.Unmarshal([]byte(`{"g":"x"}`), &back); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("unmarshal x: %v", err)
	}
	if tp, err := id.Topic(); err != nil || tp.String() != "grp77" || tp.GroupID() != 77 {
		t.Errorf("Topic = %v, %v", tp, err)
	}
	if _, err := domain.GroupID(-1).Topic(); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("Topic of a bad id: %v", err)
	}
}

func TestNewGroupProfileValidates(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, gname, avatar, intro, want string }{
		{"ok", "Night shift", "https://cdn.example/g.png", "line one\nline two", ""},
		{"empty name", "", "", "", "invalid:name:required"},
		{"name too long", strings.Repeat("群", domain.MaxGroupNameLen+1), "", "", "invalid:name:too_long"},
		{"name on two lines", "a\nb", "", "", "invalid:name:bad_format"},
		{"intro too long", "ok", "", strings.Repeat("x", domain.MaxGroupIntroLen+1), "invalid:intro:too_long"},
		{"avatar with tab", "ok", "a\tb", "", "invalid:avatar:bad_format"},
		{"avatar javascript:", "ok", "javascript:alert(1)", "", "invalid:avatar:bad_format"},
		{"avatar data:", "ok", "data:text/html,<script>alert(1)</script>", "", "invalid:avatar:bad_format"},
		{"avatar relative", "ok", "g.png", "", "invalid:avatar:bad_format"},
		{"avatar http", "ok", "http://cdn.example/g.png", "", ""},
	}
	for _, c := range cases {
		p, err := domain.NewGroupProfile(c.gname, c.avatar, c.intro)
		if got := reasonOf(err); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
		if err == nil && (p.Name() != c.gname || p.Avatar() != c.avatar || p.Intro() != c.intro) {
			t.Errorf("%s: profile %+v", c.name, p)
		}
	}
}

func TestGroupSettingsValidate(t *testing.T) {
	t.Parallel()
	if err := domain.DefaultGroupSettings().Validate(); err != nil {
		t.Fatalf("default settings invalid: %v", err)
	}
	bad := domain.DefaultGroupSettings()
	bad.WhoMayInvite = "everyone"
	if got := reasonOf(bad.Validate()); got != "invalid:who_may_invite:unknown" {
		t.Errorf("bad invite policy: %s", got)
	}
	bad = domain.GroupSettings{WhoMayInvite: domain.RoleMember}
	if got := reasonOf(bad.Validate()); got != "invalid:who_may_announce:unknown" {
		t.Errorf("missing announce policy: %s", got)
	}
}

func TestCreateGroup(t *testing.T) {
	t.Parallel()
	profile, _ := domain.NewGroupProfile("ops", "", "")
	if _, err := domain.NewGroupState(tenantA, 0); reasonOf(err) != "invalid:group_id:bad_format" {
		t.Errorf("NewGroupState(0): %v", err)
	}
	if _, err := domain.NewGroupState(domain.TenantID{}, 1); reasonOf(err) != "invalid:tenant_id:required" {
		t.Errorf("NewGroupState without tenant: %v", err)
	}
	g, _ := domain.NewGroupState(tenantA, 1)
	cases := []struct {
		name     string
		p        domain.Principal
		profile  domain.GroupProfile
		settings domain.GroupSettings
		want     string
	}{
		{"other tenant", asIn(tenantB, 1), profile, domain.DefaultGroupSettings(), domain.ReasonTenantMismatch},
		{"no profile", as(1), domain.GroupProfile{}, domain.DefaultGroupSettings(), "invalid:name:required"},
		{"bad settings", as(1), profile, domain.GroupSettings{}, "invalid:who_may_invite:unknown"},
		{"no user", as(0), profile, domain.DefaultGroupSettings(), "invalid:user_id:bad_format"},
	}
	for _, c := range cases {
		if _, err := g.Create(c.p, c.profile, c.settings, t0); reasonOf(err) != c.want {
			t.Errorf("%s: got %q, want %q", c.name, reasonOf(err), c.want)
		}
	}
	w := &groupWorld{g: g, ms: map[domain.UserID]*domain.MembershipState{}}
	w.m(t, 1)
	w.do(t)(w.g.Create(as(1), profile, domain.DefaultGroupSettings(), t0))
	if _, err := w.g.Create(as(2), profile, domain.DefaultGroupSettings(), t0); reasonOf(err) != domain.ReasonGroupExists {
		t.Errorf("second create: %v", err)
	}
	owner := w.m(t, 1)
	if !w.g.Exists() || w.g.Owner() != 1 || w.g.MemberCount() != 1 || !w.g.CreatedAt().Equal(t0) ||
		owner.Role() != domain.RoleOwner || !owner.IsMember() || owner.Version() != 1 {
		t.Errorf("after create: group %+v owner membership %+v", w.g, owner)
	}
}

// TestGroupRoundTrip drives a group through every group-stream event, each decision going over
// JSON and back through the registry, and checks the folded state field by field and against a
// fresh fold of the whole stream.
func TestGroupRoundTrip(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, 500)
	w := &groupWorld{g: g, ms: map[domain.UserID]*domain.MembershipState{}}
	var log []domain.Envelope
	step := func(evs []domain.PendingEvent, err error) {
		t.Helper()
		states := []aggregate{&w.g}
		for _, s := range w.ms {
			states = append(states, s)
		}
		for _, e := range commit(t, tenantA, evs, err, states...) {
			if e.StreamID == w.g.StreamID() {
				log = append(log, e)
			}
		}
	}
	profile, _ := domain.NewGroupProfile("Night shift", "", "")
	w.m(t, 1)
	step(w.g.Create(as(1), profile, domain.DefaultGroupSettings(), t0))
	step(w.g.Join(as(2), w.m(t, 2), 0, t0))
	step(w.g.Join(as(3), w.m(t, 3), 0, t0))
	renamed, _ := domain.NewGroupProfile("Day shift", "https://cdn.example/d.png", "we start at 9")
	step(w.g.UpdateProfile(as(1), w.m(t, 1), renamed, t0))
	settings := domain.GroupSettings{JoinApproval: true, WhoMayInvite: domain.RoleAdmin, WhoMayAnnounce: domain.RoleOwner, MuteAll: true}
	step(w.g.UpdateSettings(as(1), w.m(t, 1), settings, t0))
	step(w.g.UpdateAnnouncement(as(1), w.m(t, 1), "no deploys on Friday", t0))
	step(w.g.Leave(as(3), w.m(t, 3), t0))
	step(w.g.TransferOwnership(as(1), w.m(t, 1), w.m(t, 2), t0))

	if w.g.Profile() != renamed || w.g.Settings() != settings || w.g.Announcement() != "no deploys on Friday" ||
		w.g.Owner() != 2 || w.g.MemberCount() != 2 || w.g.Dissolved() || w.g.Version() != 8 {
		t.Fatalf("state after the scenario: %+v", w.g)
	}
	if r1, r2 := w.m(t, 1).Role(), w.m(t, 2).Role(); r1 != domain.RoleMember || r2 != domain.RoleOwner {
		t.Fatalf("roles after transfer: old owner %s, new owner %s", r1, r2)
	}
	step(w.g.Dissolve(as(2), w.m(t, 2), t0))
	if !w.g.Dissolved() {
		t.Fatal("not dissolved")
	}
	folded, err := domain.FoldGroup(tenantA, 500, toWire(t, log))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(folded, w.g) {
		t.Errorf("fold of the stream differs:\n%+v\n%+v", folded, w.g)
	}
	if _, err := domain.FoldGroup(tenantA, 501, log); !errors.Is(err, domain.ErrStreamMismatch) {
		t.Errorf("another group's stream folded: %v", err)
	}
}

func TestUnchangedProfileAndSettingsDecideNothing(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	owner := w.m(t, uOwner)
	if evs, err := w.g.UpdateProfile(as(uOwner), owner, w.g.Profile(), t0); err != nil || evs != nil {
		t.Errorf("same profile: %v, %v", evs, err)
	}
	if evs, err := w.g.UpdateSettings(as(uOwner), owner, w.g.Settings(), t0); err != nil || evs != nil {
		t.Errorf("same settings: %v, %v", evs, err)
	}
	if _, err := w.g.UpdateProfile(as(uOwner), owner, domain.GroupProfile{}, t0); reasonOf(err) != "invalid:name:required" {
		t.Errorf("zero profile: %v", err)
	}
	if _, err := w.g.UpdateAnnouncement(as(uOwner), owner, strings.Repeat("x", domain.MaxAnnouncementLen+1), t0); reasonOf(err) != "invalid:announcement:too_long" {
		t.Errorf("long announcement: %v", err)
	}
}

// memStore is an in-memory stand-in for the event store's multi-stream append: a decision is
// stored only when every stream it names is still at the expected version. It keeps the folded
// group so loading is cheap.
type memStore struct {
	mu       sync.Mutex
	versions map[string]int64
	group    domain.GroupState
}

func (s *memStore) append(t *testing.T, evs []domain.PendingEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range evs {
		if s.versions[e.StreamID] != e.ExpectedVersion {
			return domain.ErrConcurrency
		}
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser}, evs)
	if err != nil {
		return err
	}
	for _, e := range envs {
		s.versions[e.StreamID] = e.StreamVersion
		if e.StreamID == s.group.StreamID() {
			if err := s.group.Apply(e); err != nil {
				t.Error(err)
			}
		}
	}
	return nil
}

func (s *memStore) load(t *testing.T, u domain.UserID) (domain.GroupState, domain.MembershipState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Joiners are new users: their membership stream is empty until their join commits.
	m, err := domain.NewMembershipState(tenantA, s.group.ID(), u)
	if err != nil {
		t.Error(err)
	}
	return s.group, m
}

// concurrentJoins lets n users join at once against a limit, retrying on ErrConcurrency as a
// command handler does, and returns how many joined and how many were refused group_full.
// keep filters each decision before it is appended.
func concurrentJoins(t *testing.T, n, limit int, keep func(domain.PendingEvent) bool) (joined, full int, g domain.GroupState) {
	g, _ = domain.NewGroupState(tenantA, 900)
	profile, _ := domain.NewGroupProfile("big", "", "")
	store := &memStore{versions: map[string]int64{}, group: g}
	created, err := g.Create(as(1), profile, domain.DefaultGroupSettings(), t0)
	if err != nil || store.append(t, created) != nil {
		t.Fatalf("create: %v", err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func(u domain.UserID) {
			defer wg.Done()
			<-start
			for {
				g, m := store.load(t, u)
				evs, err := g.Join(as(u), m, limit, t0)
				if reasonOf(err) == domain.ReasonGroupFull {
					mu.Lock()
					full++
					mu.Unlock()
					return
				}
				if err != nil {
					t.Errorf("join %d: %v", u, err)
					return
				}
				var kept []domain.PendingEvent
				for _, e := range evs {
					if keep(e) {
						kept = append(kept, e)
					}
				}
				if err := store.append(t, kept); errors.Is(err, domain.ErrConcurrency) {
					continue
				} else if err != nil {
					t.Errorf("append %d: %v", u, err)
					return
				}
				mu.Lock()
				joined++
				mu.Unlock()
				return
			}
		}(domain.UserID(100 + i))
	}
	close(start)
	wg.Wait()
	return joined, full, store.group
}

// With the count change on the group stream, 200 concurrent joins against a limit of 151 members
// (the owner plus 150) let exactly 150 in; the other 50 are refused group_full.
func TestMemberLimitHoldsUnderConcurrentJoins(t *testing.T) {
	t.Parallel()
	joined, full, g := concurrentJoins(t, 200, 151, func(domain.PendingEvent) bool { return true })
	if joined != 150 || full != 50 || g.MemberCount() != 151 || g.Version() != 151 {
		t.Fatalf("joined %d, full %d, member count %d, group version %d; want 150, 50, 151, 151",
			joined, full, g.MemberCount(), g.Version())
	}
	// The control: without the group-stream half of the decision nothing serialises the joins
	// and the limit does not hold. This is why joins append to the group stream.
	joined, _, _ = concurrentJoins(t, 200, 151, func(e domain.PendingEvent) bool {
		return e.Type != domain.EventGroupMemberCountChanged
	})
	if joined != 200 {
		t.Fatalf("control: %d joined without the group stream, expected all 200", joined)
	}
}
