package ws

import (
	"slices"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// TestDroppedStreamsNameTheStatesAPolicyChecks: a control message that ends subscriptions
// invalidates the states the subscribe policy reads for its topic, and nothing for a topic it
// cannot parse.
func TestDroppedStreamsNameTheStatesAPolicyChecks(t *testing.T) {
	t.Parallel()
	grp, err := domain.GroupTopic(7)
	if err != nil {
		t.Fatal(err)
	}
	p2p, err := domain.DirectTopic(6, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    fanout.Message
		want []string
	}{
		{"removed member", fanout.Message{Topic: grp, Src: 2, Drop: fanout.DropUser}, []string{"group:7", "member:7:2"}},
		{"dissolved group", fanout.Message{Topic: grp, Drop: fanout.DropAll}, []string{"group:7"}},
		{"blocked peer", fanout.Message{Topic: p2p, From: 5, Src: 6, Drop: fanout.DropUser}, []string{"relation:5:6"}},
		{"no topic", fanout.Message{Drop: fanout.DropAll}, nil},
	} {
		if got := droppedStreams(&tc.m); !slices.Equal(got, tc.want) {
			t.Errorf("%s: streams %q, want %q", tc.name, got, tc.want)
		}
	}
}
