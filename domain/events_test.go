package domain_test

import (
	"testing"

	"github.com/imledger/imledger/domain"
)

func TestMessageEventTypesAreRegistered(t *testing.T) {
	t.Parallel()
	for _, k := range []domain.TopicKind{domain.TopicGroup, domain.TopicDirect} {
		for _, a := range []domain.MessageAction{domain.ActionSent, domain.ActionRecalled, domain.ActionEdited, domain.ActionDeleted, domain.ActionReadMarked} {
			typ := domain.MessageEventType(k, a)
			info, ok := domain.LookupEventType(typ)
			if !ok {
				t.Fatalf("%s not registered", typ)
			}
			want := domain.CategoryGroupMessage
			if k == domain.TopicDirect {
				want = domain.CategoryDirectMessage
			}
			if info.Category != want {
				t.Errorf("%s: category %s, want %s", typ, info.Category, want)
			}
		}
	}
	if got := domain.SentEventType(domain.TopicGroup); got != domain.EventGroupMessageSent {
		t.Fatalf("SentEventType(group) = %s", got)
	}
}

func TestConversationKey(t *testing.T) {
	t.Parallel()
	tp, _ := domain.GroupTopic(7)
	for _, s := range []string{tp.String(), domain.MessageOpsStreamID(tp, 3), domain.DeletionsStreamID(tp, 9), domain.ReadMarksStreamID(tp, 9)} {
		if got := domain.ConversationKey(s); got != "grp7" {
			t.Errorf("ConversationKey(%q) = %q", s, got)
		}
	}
}
