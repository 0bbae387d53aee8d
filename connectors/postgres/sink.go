package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/weirstream/weir/connector"
)

// Mode is how a sink writes rows.
type Mode int

const (
	// Append inserts every record as a new row (COPY).
	Append Mode = iota
	// Upsert inserts a row or, when one with the same key exists, updates
	// it: INSERT ... ON CONFLICT (key) DO UPDATE. The table needs a unique
	// index or constraint on the key columns.
	Upsert
)

func (m Mode) String() string {
	if m == Upsert {
		return "upsert"
	}
	return "append"
}

// Guarantee is a sink's delivery guarantee.
type Guarantee int

const (
	// ExactlyOnce writes each subtask's rows of a checkpoint interval in
	// one transaction, prepared (PREPARE TRANSACTION) at the checkpoint and
	// committed (COMMIT PREPARED) when the checkpoint completes. It needs
	// max_prepared_transactions > 0 on the server.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce commits a plain transaction at every checkpoint: after a
	// failure the rows since the last checkpoint are written again.
	AtLeastOnce
)

func (g Guarantee) String() string {
	if g == AtLeastOnce {
		return "at-least-once"
	}
	return "exactly-once"
}

// SinkOptions configure a sink.
type SinkOptions[T any] struct {
	// URL is the connection string: postgres://user[:password]@host:port/db
	// with libpq's parameters (sslmode, ...), or a keyword/value string.
	// Required.
	URL string
	// Table is the table written, optionally schema-qualified
	// (schema.table). Required.
	Table string
	// Rows maps records to rows (FuncMapper, StructMapper). Required.
	Rows RowMapper[T]
	// Mode is Append (default) or Upsert.
	Mode Mode
	// Key are the conflict columns of Upsert (a subset of Rows.Columns
	// with a unique index). Required with Upsert; unused with Append.
	Key []string
	// Guarantee is ExactlyOnce (default) or AtLeastOnce.
	Guarantee Guarantee
	// TransactionPrefix starts the global id of every prepared transaction
	// ("prefix-subtask-checkpoint"). After a restore the sink rolls back
	// the prepared transactions of its prefix that no checkpoint recorded,
	// so jobs writing into one database need distinct prefixes. Default
	// "weir-" + Table. Letters, digits, '.', '_' and '-' only.
	TransactionPrefix string
	// Setup, when set, is SQL run once before the sink checks the table
	// (for example CREATE TABLE IF NOT EXISTS ...).
	Setup string
	// BatchRows is the number of rows buffered before they are sent in one
	// COPY (Append) or one multi-row INSERT (Upsert); default 4096.
	BatchRows int
	// RetryTimeout bounds how long the sink reconnects after the server
	// went away, for commits and for opening a transaction; default 60s.
	RetryTimeout time.Duration
}

// EnsureDefaults fills the defaults.
func (o *SinkOptions[T]) EnsureDefaults() {
	if o.TransactionPrefix == "" {
		o.TransactionPrefix = "weir-" + unsafeGID.ReplaceAllString(o.Table, "_")
	}
	if o.BatchRows == 0 {
		o.BatchRows = 4096
	}
	if o.RetryTimeout == 0 {
		o.RetryTimeout = 60 * time.Second
	}
}

var unsafeGID = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// Validate rejects options that cannot work.
func (o *SinkOptions[T]) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("postgres sink: URL is empty: give postgres://user@host:port/db")
	case o.Table == "":
		return errors.New("postgres sink: Table is empty: name the table to write")
	case len(o.Rows.Columns) == 0 || o.Rows.Map == nil:
		return fmt.Errorf("postgres sink: table %s: Rows needs Columns and Map (see FuncMapper, StructMapper)", o.Table)
	case len(o.Rows.Types) != 0 && len(o.Rows.Types) != len(o.Rows.Columns):
		return fmt.Errorf("postgres sink: table %s: Rows.Types has %d entries for %d columns", o.Table, len(o.Rows.Types), len(o.Rows.Columns))
	case o.Mode != Append && o.Mode != Upsert:
		return fmt.Errorf("postgres sink: Mode %d: use Append or Upsert", o.Mode)
	case o.Guarantee != ExactlyOnce && o.Guarantee != AtLeastOnce:
		return fmt.Errorf("postgres sink: Guarantee %d: use ExactlyOnce or AtLeastOnce", o.Guarantee)
	case o.Mode == Upsert && len(o.Key) == 0:
		return fmt.Errorf("postgres sink: table %s: Upsert needs Key, the conflict columns", o.Table)
	case unsafeGID.MatchString(o.TransactionPrefix) || len(o.TransactionPrefix) > 150:
		return fmt.Errorf("postgres sink: TransactionPrefix %q: use at most 150 letters, digits, '.', '_' or '-'", o.TransactionPrefix)
	case o.BatchRows < 1:
		return fmt.Errorf("postgres sink: BatchRows is %d: use a positive number", o.BatchRows)
	case o.RetryTimeout < 0:
		return fmt.Errorf("postgres sink: RetryTimeout is %v: use a positive duration", o.RetryTimeout)
	}
	for _, k := range o.Key {
		if !containsString(o.Rows.Columns, k) {
			return fmt.Errorf("postgres sink: table %s: key column %q is not among the columns %s", o.Table, k, strings.Join(o.Rows.Columns, ", "))
		}
	}
	if o.Mode == Upsert && len(o.Key) == len(o.Rows.Columns) {
		return fmt.Errorf("postgres sink: table %s: every column is a key column: nothing to update on conflict; use Append", o.Table)
	}
	return nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Sink writes records into a PostgreSQL table. It is a connector.Sink and,
// with ExactlyOnce, a connector.Committer and connector.Cleaner. Safe for
// use by all subtasks at once.
type Sink[T any] struct {
	opts  SinkOptions[T]
	ident pgx.Identifier
	gidRE *regexp.Regexp

	checkMu sync.Mutex // held by Check
	probed  bool       // Check succeeded; under checkMu

	mu      sync.Mutex
	writers int         // open writers: commit connections are kept while > 0
	idle    []*pgx.Conn // commit connections not in use
}

var (
	_ connector.Sink[int] = (*Sink[int])(nil)
	_ connector.Committer = (*Sink[int])(nil)
	_ connector.Cleaner   = (*Sink[int])(nil)
)

// NewSink checks opts and returns the sink. It does not connect: Check
// (called by every writer before it writes) does.
func NewSink[T any](opts SinkOptions[T]) (*Sink[T], error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, err := pgx.ParseConfig(opts.URL); err != nil {
		return nil, fmt.Errorf("postgres sink: cannot parse URL: %v", redact(err))
	}
	return &Sink[T]{
		opts:  opts,
		ident: pgx.Identifier(strings.Split(opts.Table, ".")),
		gidRE: regexp.MustCompile("^" + regexp.QuoteMeta(opts.TransactionPrefix) + `-(\d+)-(\d+)$`),
	}, nil
}

// Options returns the sink's options, defaults filled.
func (s *Sink[T]) Options() SinkOptions[T] { return s.opts }

// redact strips a password from an error that quotes a URL.
func redact(err error) string {
	return regexp.MustCompile(`://([^:/@]+):[^@]*@`).ReplaceAllString(err.Error(), "://$1:xxxxx@")
}

// connect opens a connection, with an error that says where to.
func connect(ctx context.Context, connURL string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("cannot parse the PostgreSQL URL: %v", redact(err))
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL at %s as user %s, database %s: %v", addr(cfg.Host, cfg.Port), cfg.User, cfg.Database, pgMessage(err))
	}
	return c, nil
}

func addr(host string, port uint16) string { return host + ":" + strconv.Itoa(int(port)) }

// pgMessage is a one-line message of a pgx error.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message + " (SQLSTATE " + pe.Code + ")"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return strings.ReplaceAll(ce.Unwrap().Error(), "\n", " ")
	}
	return strings.ReplaceAll(err.Error(), "\n", " ")
}

// retryable reports whether SQLSTATE st says the server went away
// (connection exception, operator intervention: shutdown, restart).
func retryable(st string) bool { return strings.HasPrefix(st, "08") || strings.HasPrefix(st, "57") }

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Check connects and checks that the sink can work: the server takes
// prepared transactions (ExactlyOnce), the table exists with the columns
// (of the types) the mapper writes, and Upsert's key has a unique index.
// Setup runs first. A writer calls it before it writes; a CLI calls it to
// fail at start.
func (s *Sink[T]) Check(ctx context.Context) error {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	if s.probed {
		return nil
	}
	c, err := connect(ctx, s.opts.URL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := s.check(ctx, c, true); err != nil {
		return err
	}
	s.probed = true
	return nil
}

// check runs the checks on c and returns the statement description of the
// insert (its parameter types are the columns' types).
func (s *Sink[T]) check(ctx context.Context, c *pgx.Conn, setup bool) (*pgconn.StatementDescription, error) {
	o := &s.opts
	if o.Guarantee == ExactlyOnce {
		var n int
		if err := c.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&n); err != nil {
			return nil, fmt.Errorf("read max_prepared_transactions: %v", pgMessage(err))
		}
		if n == 0 {
			cfg := c.Config()
			return nil, fmt.Errorf("PostgreSQL at %s has max_prepared_transactions = 0: the exactly-once sink prepares one transaction per subtask and checkpoint; raise max_prepared_transactions (postgresql.conf, then restart the server) to at least twice the sink's parallelism, or use the at-least-once guarantee", addr(cfg.Host, cfg.Port))
		}
	}
	if setup && o.Setup != "" {
		if _, err := c.Exec(ctx, o.Setup); err != nil {
			return nil, fmt.Errorf("table %s: setup SQL failed: %v", o.Table, pgMessage(err))
		}
	}
	sd, err := c.Prepare(ctx, "", s.insertSQL(1))
	if err == nil && o.Mode == Upsert {
		// Planning (not parsing) finds ON CONFLICT's unique index.
		_, err = c.Exec(ctx, "EXPLAIN "+s.insertSQL(1), make([]any, len(o.Rows.Columns))...)
	}
	if err != nil {
		return nil, fmt.Errorf("table %s: %v", o.Table, pgMessage(err))
	}
	for i, t := range o.Rows.Types {
		if t == "" {
			continue
		}
		have := typeName(c, sd.ParamOIDs[i])
		if !typeMatches(t, have) {
			return nil, fmt.Errorf("table %s: column %s is of type %s, but the sink writes %s: change the column's type", o.Table, o.Rows.Columns[i], have, t)
		}
	}
	return sd, nil
}

func typeName(c *pgx.Conn, oid uint32) string {
	if t, ok := c.TypeMap().TypeForOID(oid); ok {
		return t.Name
	}
	return "oid " + strconv.FormatUint(uint64(oid), 10)
}

// insertSQL is the statement of n rows (Upsert's multi-row INSERT; for
// Append, the one-row form checks the table).
func (s *Sink[T]) insertSQL(n int) string {
	o := &s.opts
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(s.ident.Sanitize())
	b.WriteString(" (")
	for i, c := range o.Rows.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{c}.Sanitize())
	}
	b.WriteString(") VALUES ")
	p := 1
	for r := range n {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i := range o.Rows.Columns {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	if o.Mode == Upsert {
		b.WriteString(" ON CONFLICT (")
		for i, k := range o.Key {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(pgx.Identifier{k}.Sanitize())
		}
		b.WriteString(") DO UPDATE SET ")
		first := true
		for _, c := range o.Rows.Columns {
			if containsString(o.Key, c) {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			q := pgx.Identifier{c}.Sanitize()
			b.WriteString(q + " = EXCLUDED." + q)
		}
	}
	return b.String()
}

// NewWriter implements connector.Sink. It connects and checks the table.
func (s *Sink[T]) NewWriter(ctx connector.WriterContext) (connector.Writer[T], error) {
	w := &writer[T]{s: s, ctx: ctx, log: ctx.Logger, n: len(s.opts.Rows.Columns)}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.buf = make([]any, s.opts.BatchRows*w.n)
	cctx, cancel := context.WithTimeout(context.Background(), s.opts.RetryTimeout)
	defer cancel()
	if err := s.Check(cctx); err != nil {
		return nil, err
	}
	if err := w.connect(cctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.writers++
	s.mu.Unlock()
	if s.opts.Guarantee == ExactlyOnce {
		// What earlier runs of this subtask prepared and no checkpoint
		// recorded: the recorded ones were committed before any writer
		// opened (connector.Committer), so the rest is garbage, and would
		// collide with this run's transaction ids.
		if err := s.rollbackLeftovers(cctx, w.conn, func(sub int) bool {
			return sub == ctx.Subtask || (ctx.Subtask == 0 && sub >= ctx.Parallelism)
		}, nil); err != nil {
			w.Close()
			return nil, err
		}
		return &twoPhaseWriter[T]{w}, nil
	}
	return w, nil
}

// writer is a subtask's writer. It is an at-least-once writer; wrapped in
// a twoPhaseWriter it pre-commits.
type writer[T any] struct {
	s   *Sink[T]
	ctx connector.WriterContext
	log *slog.Logger
	n   int // columns

	conn *pgx.Conn
	sd   *pgconn.StatementDescription // of the one-row insert: the columns' types
	inTx bool
	buf  []any // rows of n values, rows*n used
	rows int
	// dedup indexes the buffered rows by key (Upsert).
	dedup map[string]int
	keyIx []int
	rowsW int64 // rows written in the open transaction
}

func (w *writer[T]) connect(ctx context.Context) error {
	if w.conn != nil {
		w.conn.Close(context.Background())
		w.conn = nil
	}
	c, err := connect(ctx, w.s.opts.URL)
	if err != nil {
		return err
	}
	sd, err := w.s.check(ctx, c, false)
	if err != nil {
		c.Close(context.Background())
		return err
	}
	w.conn, w.sd = c, sd
	return nil
}

// begin opens the transaction of the rows to come, reconnecting when the
// server went away (nothing is lost: no transaction was open).
func (w *writer[T]) begin() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.s.opts.RetryTimeout)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		var err error
		if w.conn == nil || w.conn.IsClosed() {
			err = w.connect(ctx)
		}
		if err == nil {
			begin := "BEGIN"
			if w.s.opts.Mode == Upsert {
				// A row locked by another transaction (another job, or a
				// prepared transaction left behind) fails the job rather
				// than stalling it.
				begin = "BEGIN; SET LOCAL lock_timeout = '30s'"
			}
			if _, err = w.conn.Exec(ctx, begin); err == nil {
				w.inTx, w.rowsW = true, 0
				return nil
			}
			if st := sqlState(err); st != "" && !retryable(st) {
				return fmt.Errorf("table %s: begin: %v", w.s.opts.Table, pgMessage(err))
			}
			w.conn.Close(context.Background())
			w.conn = nil
		}
		if sqlState(err) == "28P01" || sqlState(err) == "28000" || sqlState(err) == "3D000" || strings.Contains(err.Error(), "table ") {
			return err
		}
		w.log.Warn("postgres sink: server unreachable, retrying", "table", w.s.opts.Table, "subtask", w.ctx.Subtask, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("table %s: cannot open a transaction within %v: %w", w.s.opts.Table, w.s.opts.RetryTimeout, err)
		case <-time.After(delay):
		}
	}
}

func (w *writer[T]) Write(rec T) error {
	if w.rows*w.n == len(w.buf) {
		if w.s.opts.Mode == Upsert {
			// Upserts wait for the checkpoint: a row of a key that the
			// previous checkpoint's transaction (prepared, not yet
			// committed) holds would block this goroutine, which is the one
			// that commits it. The buffer holds one row per key.
			w.buf = append(w.buf, make([]any, len(w.buf))...)
		} else if err := w.send(); err != nil {
			return err
		}
	}
	dst := w.buf[w.rows*w.n : (w.rows+1)*w.n]
	if err := w.s.opts.Rows.Map(rec, dst); err != nil {
		return fmt.Errorf("table %s: row mapper: %w", w.s.opts.Table, err)
	}
	if w.s.opts.Mode == Upsert {
		// One statement cannot update a row twice: the later record of a
		// key replaces the earlier one in the batch.
		k := w.key(dst)
		if i, ok := w.dedup[k]; ok {
			copy(w.buf[i*w.n:(i+1)*w.n], dst)
			clear(dst)
			return nil
		}
		if w.dedup == nil {
			w.dedup = map[string]int{}
		}
		w.dedup[k] = w.rows
	}
	w.rows++
	return nil
}

func (w *writer[T]) key(row []any) string {
	if w.keyIx == nil {
		for _, k := range w.s.opts.Key {
			for i, c := range w.s.opts.Rows.Columns {
				if c == k {
					w.keyIx = append(w.keyIx, i)
				}
			}
		}
	}
	var b strings.Builder
	for _, i := range w.keyIx {
		fmt.Fprintf(&b, "%T:%v\x00", row[i], row[i])
	}
	return b.String()
}

// WriteBatch implements connector.BatchWriter.
func (w *writer[T]) WriteBatch(recs []T) error {
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	return nil
}

// flatRows is a pgx.CopyFromSource over the buffer.
type flatRows struct {
	buf  []any
	n, i int
	rows int
}

func (f *flatRows) Next() bool { f.i++; return f.i <= f.rows }
func (f *flatRows) Values() ([]any, error) {
	return f.buf[(f.i-1)*f.n : f.i*f.n], nil
}
func (f *flatRows) Err() error { return nil }

// maxParams is PostgreSQL's limit of parameters in one statement.
const maxParams = 65535

// send writes the buffered rows into the open transaction.
func (w *writer[T]) send() error {
	if w.rows == 0 {
		return nil
	}
	if !w.inTx {
		if err := w.begin(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	o := &w.s.opts
	var err error
	if o.Mode == Append {
		_, err = w.conn.CopyFrom(ctx, w.s.ident, o.Rows.Columns, &flatRows{buf: w.buf, n: w.n, rows: w.rows})
	} else {
		per := min(w.rows, maxParams/w.n, 1000)
		for at := 0; at < w.rows && err == nil; at += per {
			k := min(per, w.rows-at)
			_, err = w.conn.Exec(ctx, w.s.insertSQL(k), w.buf[at*w.n:(at+k)*w.n]...)
		}
	}
	if err != nil {
		if sqlState(err) == "55P03" {
			err = fmt.Errorf("table %s: upsert waited 30s for a row lock held by another transaction (see pg_locks and pg_prepared_xacts): %v", o.Table, pgMessage(err))
		} else {
			err = w.explain(err)
		}
		// The transaction is lost: the job restarts from its checkpoint.
		w.conn.Close(context.Background())
		w.conn, w.inTx = nil, false
		return err
	}
	w.rowsW += int64(w.rows)
	clear(w.buf[:w.rows*w.n])
	w.rows = 0
	clear(w.dedup)
	return nil
}

// explain turns a write error into one that names the table and, for a
// value pgx cannot encode, the column and the value.
func (w *writer[T]) explain(err error) error {
	o := &w.s.opts
	tm := w.conn.TypeMap()
	for r := range w.rows {
		for i := range w.n {
			v := w.buf[r*w.n+i]
			oid := w.sd.ParamOIDs[i]
			if _, eerr := tm.Encode(oid, pgx.BinaryFormatCode, v, nil); eerr != nil {
				return fmt.Errorf("table %s, column %s (%s): cannot write the value %.100v (Go type %T): %v", o.Table, o.Rows.Columns[i], typeName(w.conn, oid), v, v, firstLine(eerr))
			}
		}
	}
	return fmt.Errorf("table %s: write %d rows: %v", o.Table, w.rows, pgMessage(err))
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// Flush sends the buffered rows. In the at-least-once writer it commits
// them at every checkpoint (Flush(false) precedes the snapshot) and at the
// end of input; the two-phase writer commits at the end of input only (a
// job without checkpoints).
func (w *writer[T]) Flush(endOfInput bool) error {
	if err := w.send(); err != nil {
		return err
	}
	if !w.inTx {
		return nil
	}
	if _, err := w.conn.Exec(context.Background(), "COMMIT"); err != nil {
		w.conn.Close(context.Background())
		w.conn, w.inTx = nil, false
		return fmt.Errorf("table %s: commit: %v", w.s.opts.Table, pgMessage(err))
	}
	w.inTx = false
	return nil
}

// Close closes the connection: the server rolls back the open
// transaction; prepared ones stay for the Committer or the Cleaner.
func (w *writer[T]) Close() error {
	if w.conn != nil {
		w.conn.Close(context.Background())
		w.conn = nil
	}
	w.s.mu.Lock()
	w.s.writers--
	var idle []*pgx.Conn
	if w.s.writers <= 0 {
		idle, w.s.idle = w.s.idle, nil
	}
	w.s.mu.Unlock()
	for _, c := range idle {
		c.Close(context.Background())
	}
	return nil
}

// twoPhaseWriter prepares the open transaction at each checkpoint.
type twoPhaseWriter[T any] struct{ *writer[T] }

var (
	_ connector.PreCommitter     = twoPhaseWriter[int]{}
	_ connector.BatchWriter[int] = twoPhaseWriter[int]{}
)

// Flush sends the buffered rows; at the end of input (no checkpoint will
// prepare them) it commits them.
func (w twoPhaseWriter[T]) Flush(endOfInput bool) error {
	if endOfInput {
		return w.writer.Flush(true)
	}
	return w.send()
}

// gid is the global id of the transaction of checkpoint id.
func (w twoPhaseWriter[T]) gid(id int64) string {
	return fmt.Sprintf("%s-%d-%d", w.s.opts.TransactionPrefix, w.ctx.Subtask, id)
}

// PreCommit implements connector.PreCommitter: PREPARE TRANSACTION of the
// rows written since the previous checkpoint. No rows, no transaction.
func (w twoPhaseWriter[T]) PreCommit(checkpointID int64) ([]byte, error) {
	if err := w.send(); err != nil {
		return nil, err
	}
	if !w.inTx {
		return nil, nil
	}
	gid := w.gid(checkpointID)
	w.inTx = false
	if _, err := w.conn.Exec(context.Background(), "PREPARE TRANSACTION '"+gid+"'"); err != nil {
		w.conn.Close(context.Background())
		w.conn = nil
		return nil, fmt.Errorf("table %s: prepare transaction %s: %v", w.s.opts.Table, gid, pgMessage(err))
	}
	return []byte(gid), nil
}

// commitConn takes a connection for commits from the idle list or opens
// one.
func (s *Sink[T]) commitConn(ctx context.Context) (*pgx.Conn, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	return connect(ctx, s.opts.URL)
}

// release keeps c for the next commit while writers are open.
func (s *Sink[T]) release(c *pgx.Conn, broken bool) {
	s.mu.Lock()
	if !broken && !c.IsClosed() && s.writers > 0 {
		s.idle = append(s.idle, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close(context.Background())
	}
}

// Commit implements connector.Committer: COMMIT PREPARED of each
// committable. A transaction that no longer exists was committed before
// (only the Cleaner rolls back, and only what no checkpoint recorded). A
// lost connection is reopened until RetryTimeout.
func (s *Sink[T]) Commit(ctx context.Context, committables []connector.Committable) error {
	if len(committables) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.RetryTimeout)
	defer cancel()
	i := 0
	var last error
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		c, err := s.commitConn(ctx)
		for err == nil && i < len(committables) {
			gid := string(committables[i].Data)
			if !s.gidRE.MatchString(gid) {
				s.release(c, false)
				return fmt.Errorf("table %s: committable %q is not a transaction id of prefix %s: was TransactionPrefix changed? set it back to restore this checkpoint", s.opts.Table, gid, s.opts.TransactionPrefix)
			}
			_, err = c.Exec(ctx, "COMMIT PREPARED '"+gid+"'")
			if err != nil && sqlState(err) == "42704" { // undefined_object: committed already
				err = nil
			}
			if err == nil {
				i++
			}
		}
		if err == nil {
			s.release(c, false)
			return nil
		}
		if c != nil {
			s.release(c, true)
		}
		if st := sqlState(err); st != "" && !retryable(st) {
			return fmt.Errorf("table %s: commit prepared transaction %s: %v", s.opts.Table, committables[i].Data, pgMessage(err))
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("table %s: commit prepared transaction %s: server unreachable for %v: %v", s.opts.Table, committables[i].Data, s.opts.RetryTimeout, pgMessage(last))
		case <-time.After(delay):
		}
	}
}

// Cleanup implements connector.Cleaner: it rolls back the prepared
// transactions of this sink's prefix in the database that keep does not
// name (they belong to checkpoints that never completed).
func (s *Sink[T]) Cleanup(ctx context.Context, keep []connector.Committable) error {
	if s.opts.Guarantee != ExactlyOnce {
		return nil
	}
	c, err := connect(ctx, s.opts.URL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	kept := map[string]bool{}
	for _, k := range keep {
		kept[string(k.Data)] = true
	}
	return s.rollbackLeftovers(ctx, c, func(int) bool { return true }, kept)
}

// rollbackLeftovers rolls back the prepared transactions of the prefix
// whose subtask mine accepts and that kept does not name.
func (s *Sink[T]) rollbackLeftovers(ctx context.Context, c *pgx.Conn, mine func(subtask int) bool, kept map[string]bool) error {
	rows, err := c.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", s.opts.TransactionPrefix+"-")
	if err != nil {
		return fmt.Errorf("table %s: list prepared transactions: %v", s.opts.Table, pgMessage(err))
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("table %s: list prepared transactions: %v", s.opts.Table, pgMessage(err))
	}
	for _, gid := range gids {
		m := s.gidRE.FindStringSubmatch(gid)
		if m == nil || kept[gid] {
			continue
		}
		sub, _ := strconv.Atoi(m[1])
		if !mine(sub) {
			continue
		}
		if _, err := c.Exec(ctx, "ROLLBACK PREPARED '"+gid+"'"); err != nil && sqlState(err) != "42704" {
			return fmt.Errorf("table %s: roll back prepared transaction %s: %v", s.opts.Table, gid, pgMessage(err))
		}
	}
	return nil
}
