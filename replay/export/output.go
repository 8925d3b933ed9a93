package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// partWriter writes events in one format to one output.
type partWriter interface {
	write(recs []eventstore.Record) error
	close() error
}

// target is where an export writes: Stdout, one file, or a directory of part files. A file or
// part is written under a temporary name and committed together with the cursor after it in
// two steps: the cursor goes to "<cursor>.next" with the final name of the file, the file is
// renamed, then the cursor file is renamed over the old one. An export that stops between the
// steps leaves a ".next" that the next export completes (if the file made it) or drops, so the
// cursor never claims a file that does not exist and never lags one that does.
type target struct {
	cfg    Config
	dir    string // directory mode
	file   string // file mode
	cursor string // the cursor file; "" for Stdout
	next   int    // number of the next part (directory mode)
	unlock func() // ends the lock on the output; nil for Stdout

	cur     partWriter
	f       *os.File
	tmp     string
	final   string
	written int // events in the open part
	files   []string
}

// openTarget resolves cfg.Out, creating a directory when Out ends in "/", locks it against other
// exports (the cursor file's ".lock"; release with t.release) and finishes a commit an earlier
// export left half done.
func openTarget(cfg Config) (*target, error) {
	t := &target{cfg: cfg}
	if cfg.Out == Stdout {
		return t, nil
	}
	st, err := os.Stat(cfg.Out)
	isDir := err == nil && st.IsDir()
	if strings.HasSuffix(cfg.Out, "/") || strings.HasSuffix(cfg.Out, string(os.PathSeparator)) {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, fmt.Errorf("export: create %s: %w", cfg.Out, err)
		}
		isDir = true
	}
	if isDir {
		t.dir = filepath.Clean(cfg.Out)
		t.cursor = filepath.Join(t.dir, "cursor")
	} else {
		t.file = cfg.Out
		t.cursor = cfg.Out + ".cursor"
	}
	if t.unlock, err = lockOutput(t.cursor+".lock", cfg.Out); err != nil {
		return nil, err
	}
	if t.dir != "" {
		if t.next, err = nextPart(t.dir, cfg.Format); err != nil {
			t.release()
			return nil, err
		}
	}
	if err := recoverCommit(t.cursor); err != nil {
		t.release()
		return nil, err
	}
	return t, nil
}

// release ends the lock on the output.
func (t *target) release() {
	if t.unlock != nil {
		t.unlock()
		t.unlock = nil
	}
}

// partName is the name of part n.
func (t *target) partName(n int) string {
	return fmt.Sprintf("part-%06d.%s", n, t.cfg.Format)
}

// nextPart returns the number after the highest part file in dir (0 when there is none). A part
// in another format than format is an error wrapping domain.ErrInvalid: the directory's cursor
// counts its events, so parts of format after it would hold only the events since.
func nextPart(dir string, format Format) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("export: read %s: %w", dir, err)
	}
	next := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "part-") || strings.HasSuffix(name, ".tmp") {
			continue
		}
		num, ext, _ := strings.Cut(strings.TrimPrefix(name, "part-"), ".")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		if kind, _, _ := strings.Cut(ext, "."); kind != string(format) && (kind == string(FormatJSONL) || kind == string(FormatParquet)) {
			return 0, &domain.ValidationError{Field: "format", Reason: "format_differs", Detail: fmt.Sprintf(
				"%s holds %s parts (%s), not %s: resume it in its format, or export into another directory", dir, kind, name, format)}
		}
		if n >= next {
			next = n + 1
		}
	}
	return next, nil
}

// recoverCommit completes or drops the half-done commit of cursorFile's ".next".
func recoverCommit(cursorFile string) error {
	done, err := committedNext(cursorFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("export: %w", err)
	case done:
		return os.Rename(cursorFile+".next", cursorFile)
	default:
		return os.Remove(cursorFile + ".next")
	}
}

// committedNext reports whether cursorFile's ".next" (os.ErrNotExist when there is none)
// belongs to a commit that happened: written whole, and the file it names (if any) renamed into
// place. One written in part (an export stopped while writing it) was followed by no rename; one
// whose file is not in place must not claim it.
func committedNext(cursorFile string) (bool, error) {
	raw, err := os.ReadFile(cursorFile + ".next")
	if err != nil {
		return false, err
	}
	lines := strings.Split(string(raw), "\n")
	if _, err := eventstore.ParseCursor(lines[0]); err != nil || len(lines) < 3 || lines[len(lines)-1] != "" {
		return false, nil
	}
	if lines[1] != "" {
		st, err := os.Stat(filepath.Join(filepath.Dir(cursorFile), lines[1]))
		if err != nil || fileStamp(st) != lines[2] {
			return false, nil
		}
	}
	return true, nil
}

// fileStamp identifies one version of a file: its size and modification time. A file renamed
// keeps both; the file an earlier export left under the same name has others.
func fileStamp(st os.FileInfo) string {
	return strconv.FormatInt(st.Size(), 10) + " " + strconv.FormatInt(st.ModTime().UnixNano(), 10)
}

// SavedCursor returns the cursor saved for an export into out (a directory or a file), the zero
// Cursor and false when there is none.
func SavedCursor(out string) (eventstore.Cursor, bool, error) {
	path := out + ".cursor"
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		path = filepath.Join(out, "cursor")
	}
	if err := recoverCommit(path); err != nil {
		return eventstore.Cursor{}, false, err
	}
	return ReadCursorFile(path)
}

// ReadCursorFile reads a cursor file (its first line), or the ".next" of a commit an export
// stopped before finishing. A missing file is the zero Cursor and false.
func ReadCursorFile(path string) (eventstore.Cursor, bool, error) {
	c, _, ok, err := readCursorFile(path)
	return c, ok, err
}

// filtersPrefix starts the line of a cursor file that records the export's filters (the fourth;
// cursor files written before it have none).
const filtersPrefix = "filters "

// readCursorFile reads a cursor file: the cursor and the filters of the export that wrote it
// ("" when the file does not record them).
func readCursorFile(path string) (eventstore.Cursor, string, bool, error) {
	if done, _ := committedNext(path); done {
		// An export stopped between its commit's two renames: the cursor is the one after the
		// file it renamed (read only: the export that resumes the output finishes the commit).
		path += ".next"
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return eventstore.Cursor{}, "", false, nil
	}
	if err != nil {
		return eventstore.Cursor{}, "", false, fmt.Errorf("export: %w", err)
	}
	lines := strings.Split(string(raw), "\n")
	c, err := eventstore.ParseCursor(lines[0])
	if err != nil {
		return eventstore.Cursor{}, "", false, fmt.Errorf("export: cursor file %s: %w", path, err)
	}
	filters := ""
	if len(lines) > 3 {
		filters, _ = strings.CutPrefix(lines[3], filtersPrefix)
	}
	return c, filters, true, nil
}

// open starts the next part (or the file, or Stdout).
func (t *target) open() error {
	var w io.Writer
	switch {
	case t.cfg.Out == Stdout:
		w = t.cfg.Stdout
	default:
		t.final = t.file
		if t.dir != "" {
			t.final = filepath.Join(t.dir, t.partName(t.next))
			t.next++
		}
		t.tmp = t.final + ".tmp"
		f, err := os.Create(t.tmp)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		t.f, w = f, f
	}
	if t.cfg.Format == FormatParquet {
		t.cur = newParquetWriter(w, t.cfg.RowGroupRows)
	} else {
		t.cur = newJSONLWriter(w)
	}
	t.written = 0
	return nil
}

// write writes recs, rotating parts in directory mode; after each full part it commits the part
// with the cursor of its last event.
func (t *target) write(recs []eventstore.Record) error {
	for len(recs) > 0 {
		if t.cur == nil {
			if err := t.open(); err != nil {
				return err
			}
		}
		n := len(recs)
		if t.dir != "" {
			n = min(n, t.cfg.PartEvents-t.written)
		}
		if err := t.cur.write(recs[:n]); err != nil {
			return fmt.Errorf("export: write %s: %w", t.final, err)
		}
		t.written += n
		last := recs[n-1].Cursor
		recs = recs[n:]
		if t.dir != "" && t.written >= t.cfg.PartEvents {
			if err := t.commit(last); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish closes the open part (opening an empty one when a file or Stdout got nothing, so the
// output always exists) and commits it with end. An open directory part that holds nothing is
// dropped and only the cursor moves.
func (t *target) finish(end eventstore.Cursor) error {
	if t.cur == nil && t.dir == "" {
		if err := t.open(); err != nil {
			return err
		}
	}
	if t.cur != nil && t.cfg.Out == Stdout {
		err := t.cur.close()
		t.cur = nil
		return err
	}
	return t.commit(end)
}

// commit closes the open part, if any, and commits it together with the cursor c.
func (t *target) commit(c eventstore.Cursor) error {
	name := ""
	if t.cur != nil {
		if err := t.cur.close(); err != nil {
			return fmt.Errorf("export: finish %s: %w", t.final, err)
		}
		if err := t.f.Sync(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := t.f.Close(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		t.cur, t.f = nil, nil
		st, err := os.Stat(t.tmp)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		name = filepath.Base(t.final) + "\n" + fileStamp(st)
	}
	file := name
	if file == "" {
		file = "\n" // no file, no stamp
	}
	if err := writeFileSync(t.cursor+".next", c.String()+"\n"+file+"\n"+filtersPrefix+t.cfg.filters()+"\n"); err != nil {
		return err
	}
	if name != "" {
		if err := os.Rename(t.tmp, t.final); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		t.files = append(t.files, t.final)
	}
	if err := os.Rename(t.cursor+".next", t.cursor); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// abort removes the unfinished part.
func (t *target) abort() {
	if t.f != nil {
		_ = t.f.Close()
		_ = os.Remove(t.tmp)
		t.f, t.cur = nil, nil
	}
}

func writeFileSync(path, content string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return fmt.Errorf("export: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("export: %w", err)
	}
	return f.Close()
}
