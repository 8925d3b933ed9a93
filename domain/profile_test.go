package domain_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestNewUserProfileValidates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, nickname, avatar, signature string
		want                              string
	}{
		{"ok", "Mei", "https://cdn.example/a.png", "on call", ""},
		{"cjk at the limit", strings.Repeat("梅", domain.MaxNicknameLen), "", strings.Repeat("签", domain.MaxSignatureLen), ""},
		{"empty nickname", "", "", "", "invalid:nickname:required"},
		{"blank nickname", "   ", "", "", "invalid:nickname:required"},
		{"nickname too long", strings.Repeat("梅", domain.MaxNicknameLen+1), "", "", "invalid:nickname:too_long"},
		{"nickname with newline", "Mei\nLi", "", "", "invalid:nickname:bad_format"},
		{"nickname not utf-8", "Mei\xff", "", "", "invalid:nickname:bad_format"},
		{"avatar with space", "Mei", "https://cdn.example/a b.png", "", "invalid:avatar:bad_format"},
		{"avatar too long", "Mei", "https://" + strings.Repeat("a", domain.MaxAvatarURLLen), "", "invalid:avatar:too_long"},
		{"avatar javascript:", "Mei", "javascript:alert(1)", "", "invalid:avatar:bad_format"},
		{"avatar javascript: upper case", "Mei", "JavaScript://cdn.example/%0Aalert(1)", "", "invalid:avatar:bad_format"},
		{"avatar data:", "Mei", "data:image/png;base64,iVBORw0KGgo=", "", "invalid:avatar:bad_format"},
		{"avatar relative", "Mei", "/img/a.png", "", "invalid:avatar:bad_format"},
		{"avatar scheme-relative", "Mei", "//cdn.example/a.png", "", "invalid:avatar:bad_format"},
		{"avatar ftp", "Mei", "ftp://cdn.example/a.png", "", "invalid:avatar:bad_format"},
		{"avatar without host", "Mei", "https:///a.png", "", "invalid:avatar:bad_format"},
		{"avatar opaque http", "Mei", "http:cdn.example/a.png", "", "invalid:avatar:bad_format"},
		{"avatar storage key", "Mei", "avatars/7.png", "", "invalid:avatar:bad_format"},
		{"avatar http", "Mei", "http://cdn.example:8080/a.png?size=64", "", ""},
		{"signature too long", "Mei", "", strings.Repeat("x", domain.MaxSignatureLen+1), "invalid:signature:too_long"},
		{"signature with control", "Mei", "", "a\x00b", "invalid:signature:bad_format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, err := domain.NewUserProfile(c.nickname, c.avatar, c.signature)
			if got := reasonOf(err); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if err != nil {
				var v *domain.ValidationError
				if !errors.As(err, &v) || !errors.Is(err, domain.ErrInvalid) {
					t.Fatalf("error %T is not a *ValidationError wrapping ErrInvalid", err)
				}
				return
			}
			if p.Nickname() != c.nickname || p.Avatar() != c.avatar || p.Signature() != c.signature {
				t.Fatalf("profile %q %q %q", p.Nickname(), p.Avatar(), p.Signature())
			}
		})
	}
}

func TestProfileMatrix(t *testing.T) {
	t.Parallel()
	const me domain.UserID = 30
	profile, _ := domain.NewUserProfile("Mei", "", "")
	cases := []struct {
		actor string
		p     domain.Principal
		want  string
	}{
		{"self", asIn(tenantA, me), ""},
		{"other_user", asIn(tenantA, me+1), domain.ReasonNotSelf},
		{"other_tenant", asIn(tenantB, me), domain.ReasonTenantMismatch},
	}
	for _, c := range cases {
		s, _ := domain.NewProfileState(tenantA, me)
		evs, err := s.Update(c.p, profile, t0)
		if got := reasonOf(err); got != c.want {
			t.Errorf("update by %s: got %q, want %q", c.actor, got, c.want)
			continue
		}
		if err == nil && (len(evs) != 1 || evs[0].Type != domain.EventUserProfileUpdated || evs[0].StreamID != "user:30") {
			t.Errorf("update by %s: events %+v", c.actor, evs)
		}
	}
}

func TestProfileRoundTrip(t *testing.T) {
	t.Parallel()
	const me domain.UserID = 31
	s, err := domain.NewProfileState(tenantA, me)
	if err != nil {
		t.Fatal(err)
	}
	p := asIn(tenantA, me)
	var log []domain.Envelope
	step := func(evs []domain.PendingEvent, err error) { log = append(log, commit(t, tenantA, evs, err, &s)...) }

	first, _ := domain.NewUserProfile("Mei", "https://cdn.example/mei.png", "")
	step(s.Update(p, first, t0))
	second, _ := domain.NewUserProfile("Mei Li", "", "night owl")
	step(s.Update(p, second, t0.Add(1)))
	if s.Profile() != second || s.Version() != 2 || !s.UpdatedAt().Equal(t0.Add(1)) {
		t.Fatalf("profile %+v version %d updated %v", s.Profile(), s.Version(), s.UpdatedAt())
	}
	if evs, err := s.Update(p, second, t0.Add(2)); err != nil || evs != nil {
		t.Errorf("unchanged profile decided %v, %v", evs, err)
	}
	if _, err := s.Update(p, domain.UserProfile{}, t0); reasonOf(err) != "invalid:nickname:required" {
		t.Errorf("zero profile: %v", err)
	}
	folded, err := domain.FoldProfile(tenantA, me, toWire(t, log))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(folded, s) {
		t.Errorf("fold differs:\n%+v\n%+v", folded, s)
	}
	for _, e := range log {
		for _, secret := range []string{"password", "hash", "token"} {
			if strings.Contains(string(e.Payload), secret) {
				t.Errorf("profile event carries %q: %s", secret, e.Payload)
			}
		}
	}
	if _, err := domain.FoldProfile(tenantA, me+1, log); !errors.Is(err, domain.ErrStreamMismatch) {
		t.Errorf("another user's stream folded: %v", err)
	}
}

func TestProfileEvents(t *testing.T) {
	t.Parallel()
	assertBusinessEvents(t, domain.EventUserProfileUpdated)
	if got := domain.ProfileStreamID(7); got != "user:7" {
		t.Errorf("ProfileStreamID = %q", got)
	}
	if _, err := domain.NewProfileState(tenantA, 0); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("zero user: %v", err)
	}
}

func TestProfilePatchMergesIntoTheFoldedProfile(t *testing.T) {
	t.Parallel()
	const me domain.UserID = 32
	str := func(s string) *string { return &s }
	base, _ := domain.NewUserProfile("Mei", "https://cdn.example/mei.png", "night owl")
	cases := []struct {
		name      string
		patch     domain.ProfilePatch
		empty     bool // patch the empty profile state instead of base
		want      [3]string
		unchanged bool
		err       string
	}{
		{name: "empty patch", unchanged: true, want: [3]string{"Mei", "https://cdn.example/mei.png", "night owl"}},
		{name: "same values", patch: domain.ProfilePatch{Nickname: str("Mei"), Signature: str("night owl")}, unchanged: true,
			want: [3]string{"Mei", "https://cdn.example/mei.png", "night owl"}},
		{name: "nickname only", patch: domain.ProfilePatch{Nickname: str("Li")}, want: [3]string{"Li", "https://cdn.example/mei.png", "night owl"}},
		{name: "avatar only", patch: domain.ProfilePatch{Avatar: str("https://a/x.png")}, want: [3]string{"Mei", "https://a/x.png", "night owl"}},
		{name: "remove signature", patch: domain.ProfilePatch{Signature: str("")}, want: [3]string{"Mei", "https://cdn.example/mei.png", ""}},
		{name: "whole profile", patch: base.Patch(), unchanged: true, want: [3]string{"Mei", "https://cdn.example/mei.png", "night owl"}},
		{name: "bad avatar", patch: domain.ProfilePatch{Avatar: str("a b")}, err: "invalid:avatar:bad_format"},
		{name: "bad avatar, no profile yet", patch: domain.ProfilePatch{Avatar: str("a b")}, empty: true, err: "invalid:avatar:bad_format"},
		{name: "no nickname, no profile yet", patch: domain.ProfilePatch{Signature: str("hi")}, empty: true, err: "invalid:nickname:required"},
		{name: "empty patch, no profile yet", empty: true, err: "invalid:nickname:required"},
		{name: "blank nickname", patch: domain.ProfilePatch{Nickname: str(" ")}, err: "invalid:nickname:required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, _ := domain.NewProfileState(tenantA, me)
			if !c.empty {
				evs, err := s.Update(asIn(tenantA, me), base, t0)
				commit(t, tenantA, evs, err, &s)
			}
			evs, err := s.Patch(asIn(tenantA, me), c.patch, t0.Add(1))
			if got := reasonOf(err); got != c.err {
				t.Fatalf("got %q, want %q", got, c.err)
			}
			if err != nil {
				return
			}
			if c.unchanged != (len(evs) == 0) {
				t.Fatalf("events %+v, want unchanged %v", evs, c.unchanged)
			}
			if len(evs) > 0 {
				commit(t, tenantA, evs, nil, &s)
			}
			p := s.Profile()
			if got := [3]string{p.Nickname(), p.Avatar(), p.Signature()}; got != c.want {
				t.Fatalf("profile %q, want %q", got, c.want)
			}
		})
	}
	s, _ := domain.NewProfileState(tenantA, me)
	if _, err := s.Patch(asIn(tenantA, me+1), base.Patch(), t0); reasonOf(err) != domain.ReasonNotSelf {
		t.Errorf("patch by another user: %v", err)
	}
}

// TestProfilePatchKeepsARecordedAvatarItLeavesAlone: a profile recorded with an avatar the URL
// rule now refuses can still change its other fields (the avatar is kept as recorded), while a
// patch that sets such an avatar is refused.
func TestProfilePatchKeepsARecordedAvatarItLeavesAlone(t *testing.T) {
	t.Parallel()
	const me domain.UserID = 33
	str := func(s string) *string { return &s }
	base, _ := domain.NewUserProfile("Mei", "", "night owl")
	s, _ := domain.NewProfileState(tenantA, me)
	evs, err := s.Update(asIn(tenantA, me), base, t0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("update: %v %v", evs, err)
	}
	evs[0].Payload.(*domain.UserProfileUpdated).Avatar = "avatars/legacy.png" // recorded under the older rule
	commit(t, tenantA, evs, nil, &s)
	evs, err = s.Patch(asIn(tenantA, me), domain.ProfilePatch{Nickname: str("Li")}, t0.Add(1))
	if err != nil || len(evs) != 1 {
		t.Fatalf("patching the nickname beside a legacy avatar: %v %v", evs, err)
	}
	if got := evs[0].Payload.(*domain.UserProfileUpdated); got.Nickname != "Li" || got.Avatar != "avatars/legacy.png" {
		t.Fatalf("patched profile %+v, want nickname Li and the avatar kept", got)
	}
	if _, err := s.Patch(asIn(tenantA, me), domain.ProfilePatch{Avatar: str("javascript:alert(1)")}, t0.Add(2)); reasonOf(err) != "invalid:avatar:bad_format" {
		t.Fatalf("setting a javascript: avatar: %v", err)
	}
}

// TestProfilePatchSetsDiscoverable checks that a user is discoverable until they choose not to
// be, that the choice is its own event (user.discoverable_set.v1) folded into the state, that a
// patch repeating the current choice decides nothing, and that a patch setting a profile field
// and the choice decides both in one go.
func TestProfilePatchSetsDiscoverable(t *testing.T) {
	t.Parallel()
	const me domain.UserID = 33
	yes, no := true, false
	nick := "Mei"
	s, _ := domain.NewProfileState(tenantA, me)
	base, _ := domain.NewUserProfile("Mei", "", "")
	evs, err := s.Update(asIn(tenantA, me), base, t0)
	commit(t, tenantA, evs, err, &s)
	if !s.Discoverable() {
		t.Fatal("a new user is not discoverable")
	}
	for _, c := range []struct {
		name  string
		patch domain.ProfilePatch
		types []domain.EventType
		after bool
	}{
		{"already discoverable", domain.ProfilePatch{Discoverable: &yes}, nil, true},
		{"opt out", domain.ProfilePatch{Discoverable: &no}, []domain.EventType{domain.EventUserDiscoverableSet}, false},
		{"opt out again", domain.ProfilePatch{Discoverable: &no}, nil, false},
		{"nickname unchanged, opt in", domain.ProfilePatch{Nickname: &nick, Discoverable: &yes}, []domain.EventType{domain.EventUserDiscoverableSet}, true},
		{"rename and opt out", domain.ProfilePatch{Nickname: ptr("Li"), Discoverable: &no},
			[]domain.EventType{domain.EventUserProfileUpdated, domain.EventUserDiscoverableSet}, false},
	} {
		evs, err := s.Patch(asIn(tenantA, me), c.patch, t0.Add(time.Second))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var types []domain.EventType
		for _, e := range evs {
			types = append(types, e.Type)
		}
		if !slices.Equal(types, c.types) {
			t.Fatalf("%s: decided %v, want %v", c.name, types, c.types)
		}
		if len(evs) > 0 {
			commit(t, tenantA, evs, nil, &s)
		}
		if s.Discoverable() != c.after {
			t.Fatalf("%s: discoverable %v, want %v", c.name, s.Discoverable(), c.after)
		}
	}
	if s.Profile().Nickname() != "Li" {
		t.Errorf("nickname %q after the rename", s.Profile().Nickname())
	}
	assertBusinessEvents(t, domain.EventUserDiscoverableSet)
}

func ptr[T any](v T) *T { return &v }
