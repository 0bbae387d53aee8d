package nexmark

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Counts counts events by kind.
type Counts struct {
	Persons, Auctions, Bids int64
}

// Total is the number of events counted.
func (c Counts) Total() int64 { return c.Persons + c.Auctions + c.Bids }

func (c *Counts) add(t EventType) {
	switch t {
	case PersonEvent:
		c.Persons++
	case AuctionEvent:
		c.Auctions++
	case BidEvent:
		c.Bids++
	}
}

// WriteJSON writes the first n events of the stream that cfg describes (as
// a single generator makes it: events 0 to n-1 in order) to w, one JSON line
// each (see AppendJSON). cfg.Events is ignored.
func WriteJSON(w io.Writer, cfg Config, n int64) (Counts, error) {
	if n < 0 {
		return Counts{}, fmt.Errorf("nexmark: the number of events must be >= 0, got %d", n)
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		return Counts{}, err
	}
	const flushAt = 64 << 10
	var counts Counts
	buf := make([]byte, 0, flushAt+4<<10)
	for i := range n {
		ev := g.Event(i)
		counts.add(ev.Type)
		buf = append(AppendJSON(buf, &ev), '\n')
		if len(buf) >= flushAt {
			if _, err := w.Write(buf); err != nil {
				return counts, err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return counts, err
		}
	}
	return counts, nil
}

var errIsDir = errors.New("is a directory")

// WriteJSONFile writes the first n events as WriteJSON does to the file at
// path, which it replaces. The file appears complete or not at all: the
// events go to a temporary file in the same directory, renamed to path once
// written. An error writing the file wraps its cause (such as
// fs.ErrPermission), and errors.Unwrap returns that cause.
func WriteJSONFile(path string, cfg Config, n int64) (Counts, error) {
	if n < 0 {
		return Counts{}, fmt.Errorf("nexmark: the number of events must be >= 0, got %d", n)
	}
	if err := cfg.Validate(); err != nil {
		return Counts{}, err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return Counts{}, fmt.Errorf("nexmark: write %s: %w", path, errIsDir)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return Counts{}, fmt.Errorf("nexmark: write %s: %w", path, pathCause(err))
	}
	counts, err := func() (Counts, error) {
		w := bufio.NewWriterSize(tmp, 1<<20)
		counts, err := WriteJSON(w, cfg, n)
		if err == nil {
			err = w.Flush()
		}
		if err == nil {
			err = tmp.Chmod(0o644)
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), path)
		}
		return counts, err
	}()
	if err != nil {
		os.Remove(tmp.Name())
		return counts, fmt.Errorf("nexmark: write %s: %w", path, pathCause(err))
	}
	return counts, nil
}

// pathCause strips the operation and path of a *fs.PathError, which the
// callers' messages already name.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
