package eventstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bad := eventstore.Config{
		MaxBatch:         -1,
		MaxRead:          -1,
		NotifyChannel:    strings.Repeat("x", 64),
		ListenMinBackoff: time.Second,
		ListenMaxBackoff: time.Millisecond,
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, field := range []string{"MaxBatch", "MaxRead", "NotifyChannel", "ListenMaxBackoff", "Logger"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate does not report %s: %v", field, err)
		}
	}
	if _, err := eventstore.New(nil, eventstore.Config{}); err == nil {
		t.Fatal("New accepted a nil pool")
	}
}
