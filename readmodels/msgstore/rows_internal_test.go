package msgstore

import (
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
)

// Every row builder gives one value per column of its table, for a normal and a refused op, and
// without growing its row past the capacity it was made with.
func TestRowsMatchTheirColumns(t *testing.T) {
	grp, err := domain.ParseTopic("grp42")
	if err != nil {
		t.Fatal(err)
	}
	p2p, err := domain.DirectTopic(7, 9)
	if err != nil {
		t.Fatal(err)
	}
	sent := domain.MessageSent{Seq: 3, From: 7, ClientMsgID: "c1", MsgType: domain.MsgText, Content: []byte(`{"text":"hi"}`)}
	for _, c := range []struct {
		name    string
		columns string
		row     func(op) []any
		topic   domain.Topic
	}{
		{"group", groupColumns, groupRow, grp},
		{"direct", directColumns, directRow, p2p},
	} {
		want := len(strings.Split(c.columns, ","))
		for _, refused := range []bool{false, true} {
			row := c.row(op{topic: c.topic, sent: sent, refused: refused})
			if len(row) != want || cap(row) != want {
				t.Errorf("%s row (refused %v): %d values in a row of capacity %d, want %d columns", c.name, refused, len(row), cap(row), want)
			}
		}
	}
}
