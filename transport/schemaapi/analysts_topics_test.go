package schemaapi_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/transport/schemaapi"
)

// analystsTopics parses the topic table of docs/analysts.md ("### Topics" under "Consuming the
// event stream"): for each topic it names, the event types its row lists.
func analystsTopics(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/analysts.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n### Topics\n")
	if start < 0 {
		t.Fatal("docs/analysts.md has no ### Topics section")
	}
	section := doc[start+1:]
	if end := strings.Index(section[4:], "\n#"); end >= 0 {
		section = section[:end+4]
	}
	code := regexp.MustCompile("`([^`]+)`")
	eventType := regexp.MustCompile(`^[a-z_]+(\.[a-z_]+)+\.v[0-9]+$`)
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "topic" {
			continue
		}
		var types []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			if eventType.MatchString(m[1]) {
				types = append(types, m[1])
			}
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			if strings.HasPrefix(m[1], "im.replay.") { // republish's topics of the operator's choosing
				continue
			}
			if _, dup := out[m[1]]; dup {
				t.Errorf("docs/analysts.md topic table: %s has two rows", m[1])
			}
			out[m[1]] = types
		}
	}
	return out
}

// TestAnalystsTopicTableMatchesTheRegistry fails when the analysts' topic table and the event
// registry disagree: every topic has a row, every registered event type is listed on the topic it
// is published to, and the table names no event type the build does not publish there.
func TestAnalystsTopicTableMatchesTheRegistry(t *testing.T) {
	table := analystsTopics(t)
	want := map[string][]string{}
	for _, name := range kafka.TopicNames() {
		want[name] = nil
		if _, ok := table[name]; !ok {
			t.Errorf("docs/analysts.md topic table has no row for %s", name)
		}
	}
	for _, e := range schemaapi.NewIndex(kafka.Config{}, "").EventTypes {
		if e.Topic == "" {
			t.Errorf("%s has no topic", e.EventType)
			continue
		}
		want[e.Topic] = append(want[e.Topic], e.EventType)
	}
	for topic, types := range table {
		if _, ok := want[topic]; !ok {
			t.Errorf("docs/analysts.md topic table names %s, which is no topic of this build", topic)
		}
		for _, typ := range types {
			if !slices.Contains(want[topic], typ) {
				t.Errorf("docs/analysts.md topic table lists %s on %s; this build publishes no such event there", typ, topic)
			}
		}
	}
	for topic, types := range want {
		for _, typ := range types {
			if !slices.Contains(table[topic], typ) {
				t.Errorf("docs/analysts.md topic table does not list %s on %s", typ, topic)
			}
		}
	}
}
