package replay

import (
	"fmt"
	"io"

	"github.com/imledger/imledger/readmodels/msgstore"
)

var _ Reporter[msgstore.TopicSummary] = messagesModel{}

// Report writes the outcome of a verification of messages-mysql to out, topic by topic: one line
// with the topics compared and the events replayed, and one more line per topic whose row count
// or checksum (msgstore.Checksum) differs. A side that lacks the topic has a zero summary.
func (messagesModel) Report(out io.Writer, v Verification[msgstore.TopicSummary]) {
	if v.OK() {
		fmt.Fprintf(out, "tenant %s: %d topics match a rebuild from %d events\n", v.Tenant, v.Parts, v.Events)
		return
	}
	fmt.Fprintf(out, "tenant %s: %d of %d topics differ from a rebuild from %d events\n", v.Tenant, len(v.Diffs), v.Parts, v.Events)
	for _, d := range v.Diffs {
		fmt.Fprintf(out, "  %s: live %s; rebuilt %s\n", d.Part, topicSummary(d.Live), topicSummary(d.Rebuilt))
	}
}

// topicSummary spells out a topic's summary.
func topicSummary(s msgstore.TopicSummary) string {
	return fmt.Sprintf("rows=%d deletions=%d read_marks=%d checksum=%016x", s.Rows, s.Deletions, s.ReadMarks, s.Checksum)
}
