package export

import (
	"bufio"
	"io"

	"github.com/imledger/imledger/commands/eventstore"
)

// jsonlWriter writes one envelope per line.
type jsonlWriter struct {
	w   *bufio.Writer
	buf []byte
}

func newJSONLWriter(w io.Writer) *jsonlWriter {
	return &jsonlWriter{w: bufio.NewWriterSize(w, 1<<20), buf: make([]byte, 0, 4096)}
}

func (j *jsonlWriter) write(recs []eventstore.Record) error {
	for i := range recs {
		j.buf = recs[i].Envelope.AppendJSON(j.buf[:0])
		j.buf = append(j.buf, '\n')
		if _, err := j.w.Write(j.buf); err != nil {
			return err
		}
	}
	return nil
}

func (j *jsonlWriter) close() error { return j.w.Flush() }
