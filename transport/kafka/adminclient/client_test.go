package adminclient

import (
	"encoding/json"
	"testing"

	"github.com/imledger/imledger/domain"
)

func TestCommandsAreKeyedByWhatTheyAreAbout(t *testing.T) {
	t.Parallel()
	c := &Client{cfg: Config{Source: "hotgo", Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops"}}}
	for _, tt := range []struct {
		typ     domain.AdminCommandType
		payload any
		key     string
	}{
		{domain.CmdUserBan, domain.UserReasonPayload{UserID: 42}, "acme:user:42"},
		{domain.CmdGroupRemoveMember, domain.GroupRemoveMemberPayload{GroupID: 7, UserID: 42}, "acme:group:7"},
		{domain.CmdMessageRecall, map[string]string{"topic": "grp7", "seq": "3", "reason": "x"}, "acme:topic:grp7"},
		{domain.CmdTenantSuspend, nil, "acme"},
		{domain.CmdUserBan, map[string]string{"user_id": "4 2"}, "acme"},
	} {
		cmd, err := c.NewCommand("acme", tt.typ, tt.payload)
		if err != nil {
			t.Fatal(err)
		}
		if got := Key(cmd); got != tt.key {
			t.Errorf("%s %v: key %q, want %q", tt.typ, tt.payload, got, tt.key)
		}
		if cmd.Version != domain.AdminCommandVersion || cmd.SourceService != "hotgo" || cmd.Actor.ID != "ops" || !json.Valid(cmd.Payload) {
			t.Errorf("envelope: %+v", cmd)
		}
	}
}
