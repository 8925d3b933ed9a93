package export

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Format is an output format.
type Format string

// The output formats.
const (
	// FormatJSONL writes one envelope per line, as the JSON of the Kafka record values.
	FormatJSONL Format = "jsonl"
	// FormatParquet writes one row per event: typed envelope columns, the payload as a JSON
	// string, and flattened columns of message events (see Row).
	FormatParquet Format = "parquet"
)

// Stdout is the Out that writes to Config.Stdout (JSON Lines only).
const Stdout = "-"

// Config says what to export and where.
type Config struct {
	// Format is FormatJSONL or FormatParquet. Default FormatJSONL.
	Format Format
	// Out is where the events go: a file path (written to a temporary file and renamed when
	// complete, its cursor in Out+".cursor"), a directory (an existing one, or a path ending in
	// "/"; part files part-NNNNNN.<format> of at most PartEvents events each, numbered on from the
	// highest already there, its cursor in the file "cursor", which the next export into the
	// directory resumes from), or Stdout. Required.
	Out string
	// Stdout receives the events when Out is Stdout. Required then.
	Stdout io.Writer
	// Tenant keeps one tenant's events; zero means every tenant.
	Tenant domain.TenantID
	// Types keeps events whose type matches one of these path.Match globs, e.g. "message.*";
	// a type matches when its stored name or, unless AsStored, its current name does. A glob
	// that matches no registered type is an error. Empty means every type.
	Types []string
	// Since and Until keep events that occurred in [Since, Until) (occurred_at: when the
	// command decided them, just before their transaction committed). Zero means unbounded.
	Since, Until time.Time
	// From is the cursor to resume after; zero starts at the beginning of the log (or, for a
	// directory, at the cursor saved in it). For a directory that holds a cursor it must be zero
	// or that cursor: another would write events the directory holds again, or leave a gap.
	From eventstore.Cursor
	// To, unless zero, is the last cursor exported (inclusive).
	To eventstore.Cursor
	// AsStored writes events with the type, version and payload they were stored with. By
	// default old versions are upcast to the current one (domain.Upcast), as every reader of
	// imledger sees them.
	AsStored bool
	// PartEvents is the most events a part file of a directory holds. Default 1,000,000.
	PartEvents int
	// PageSize is how many events one read of the event store returns. Default 5000.
	PageSize int
	// RowGroupRows is the most rows of a Parquet row group, which the writer buffers in memory.
	// Default 65,536.
	RowGroupRows int
	// Readers is how many stretches of the log are read at once, each on a connection of its
	// own, when the Reader can split the range (*eventstore.Store does); 1 reads with one query
	// at a time. It helps where PostgreSQL has idle cores; on a saturated machine it only costs
	// memory. Default 1.
	Readers int
	// ChunkEvents is the length of such a stretch, in log events of any tenant; memory holds
	// about Readers × ChunkEvents events. Default 20,000.
	ChunkEvents int
	// Progress, unless nil, receives a progress bar.
	Progress io.Writer
	// Logger receives what the export did. Default: discard.
	Logger *slog.Logger
	// Opener opens the sealed values of personal content (DESIGN §7a): an event is written with
	// its plaintext where the data key exists and the erased marker where it was destroyed, so
	// an export made after an erasure holds nothing of the erased user. A key store that fails
	// fails the export. Nil: sealed values are written as stored.
	Opener domain.Opener
	// Now is the clock of the export's summary. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Format == "" {
		c.Format = FormatJSONL
	}
	if c.PartEvents == 0 {
		c.PartEvents = 1_000_000
	}
	if c.PageSize == 0 {
		c.PageSize = 5000
	}
	if c.RowGroupRows == 0 {
		c.RowGroupRows = 1 << 16
	}
	if c.Readers == 0 {
		c.Readers = 1
	}
	if c.ChunkEvents == 0 {
		c.ChunkEvents = 20_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports every invalid field at once, with defaults applied to unset ones.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Format != FormatJSONL && c.Format != FormatParquet {
		errs = append(errs, fmt.Errorf("export: format %q: want %s or %s", c.Format, FormatJSONL, FormatParquet))
	}
	switch {
	case c.Out == "":
		errs = append(errs, errors.New("export: an output is required (a file, a directory or - for stdout)"))
	case c.Out == Stdout && c.Format != FormatJSONL:
		errs = append(errs, errors.New("export: only jsonl can be written to stdout; Parquet needs a file"))
	case c.Out == Stdout && c.Stdout == nil:
		errs = append(errs, errors.New("export: Stdout is required to write to -"))
	}
	if c.PartEvents < 1 || c.PageSize < 1 || c.RowGroupRows < 1 || c.Readers < 1 || c.ChunkEvents < 1 {
		errs = append(errs, errors.New("export: PartEvents, PageSize, RowGroupRows, Readers and ChunkEvents must be positive"))
	}
	if !c.Since.IsZero() && !c.Until.IsZero() && !c.Until.After(c.Since) {
		errs = append(errs, fmt.Errorf("export: until %s is not after since %s", c.Until.Format(time.RFC3339), c.Since.Format(time.RFC3339)))
	}
	if !c.To.IsZero() && !c.From.Before(c.To) {
		errs = append(errs, fmt.Errorf("export: cursor range %s..%s is empty", c.From, c.To))
	}
	for _, g := range c.Types {
		if strings.TrimSpace(g) == "" {
			errs = append(errs, errors.New("export: an empty type glob"))
		}
	}
	return errors.Join(errs...)
}

// Result is what an export wrote.
type Result struct {
	// Events is how many events were written.
	Events int64
	// Files are the files written, in order (none for Stdout).
	Files []string
	// Cursor is where the next export resumes to get exactly the events committed since.
	Cursor eventstore.Cursor
	// CursorFile is where Cursor was saved ("" for Stdout).
	CursorFile string
	// Duration is how long the export took.
	Duration time.Duration
}

// PerSecond is the export's throughput in events per second.
func (r Result) PerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Events) / r.Duration.Seconds()
}
