package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/weirstream/weir/connector"
)

// ChangeKind is the kind of a captured change.
type ChangeKind int

const (
	// Read is a row of the initial snapshot.
	Read ChangeKind = iota
	// Insert is an inserted row (New).
	Insert
	// Update is an updated row: New, and Old where the table's replica
	// identity gives it (the key columns with DEFAULT when the key
	// changed, every column with FULL).
	Update
	// Delete is a deleted row: Old holds the key columns (every column
	// with replica identity FULL).
	Delete
)

func (k ChangeKind) String() string {
	return [...]string{"read", "insert", "update", "delete"}[k]
}

// Change is one captured row change.
type Change struct {
	Kind ChangeKind
	// Table is schema.table.
	Table string
	// LSN is the commit LSN of the change's transaction (for Read, the
	// slot's consistent point).
	LSN uint64
	// CommitTime is the commit time of the transaction (for Read, the
	// time of the snapshot). The reader emits it as the event time.
	CommitTime time.Time
	// New and Old are the rows after and before the change, by column
	// name; a TOASTed value that the update did not change is absent.
	New, Old map[string]any
}

// Column names a column that must exist, with one of the given types.
type Column struct {
	Table, Name string
	// Types are PostgreSQL type names separated by "|" ("" for any).
	Types string
}

// CDCOptions configure a change-data-capture source.
type CDCOptions struct {
	// URL is the connection string of the database; the user needs the
	// REPLICATION attribute and SELECT on the tables. Required.
	URL string
	// Tables are the captured tables (schema-qualified or in the search
	// path). Required.
	Tables []string
	// Slot is the logical replication slot (plugin pgoutput), created if
	// missing; default "weir_slot". One job per slot.
	Slot string
	// Publication is the publication of Tables, created if missing;
	// default Slot + "_pub".
	Publication string
	// NoSnapshot skips the initial snapshot: only changes committed
	// after the slot's creation are read.
	NoSnapshot bool
	// StopAtCurrent makes the source bounded: it ends at the WAL position
	// current at the job's first start (kept in the checkpoint).
	StopAtCurrent bool
	// Columns must exist (checked at start), e.g. the column a mapper
	// reads.
	Columns []Column
	// StatusInterval is how often the reader reports its confirmed
	// position to the server, which keeps the slot alive; default 10s.
	StatusInterval time.Duration
}

// EnsureDefaults fills the defaults.
func (o *CDCOptions) EnsureDefaults() {
	if o.Slot == "" {
		o.Slot = "weir_slot"
	}
	if o.Publication == "" {
		o.Publication = o.Slot + "_pub"
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = 10 * time.Second
	}
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Validate rejects options that cannot work.
func (o *CDCOptions) Validate() error {
	switch {
	case o.URL == "":
		return errors.New("postgres CDC: URL is empty: give postgres://user@host:port/db")
	case len(o.Tables) == 0:
		return errors.New("postgres CDC: Tables is empty: name the tables to capture")
	case !identRE.MatchString(o.Slot):
		return fmt.Errorf("postgres CDC: slot name %q: use lower-case letters, digits and '_'", o.Slot)
	case !identRE.MatchString(o.Publication):
		return fmt.Errorf("postgres CDC: publication name %q: use lower-case letters, digits and '_'", o.Publication)
	case o.StatusInterval < 0:
		return fmt.Errorf("postgres CDC: StatusInterval is %v: use a positive duration", o.StatusInterval)
	}
	return nil
}

// CDC is a source of the changes of PostgreSQL tables, through logical
// replication (pgoutput): the tables' rows at the first start (the slot's
// exported snapshot, so that nothing is missed or doubled between the
// snapshot and the stream), then every committed change. Map turns each
// change into zero or one record.
//
// The position in a checkpoint is an LSN. The slot's confirmed flush
// position advances only when a checkpoint that covers it completes
// (connector.CheckpointListener): a restore from the latest checkpoint
// finds every later change still in the slot.
type CDC[T any] struct {
	opts CDCOptions
	fn   func(*Change) (T, bool, error)
}

// NewCDC returns the source. fn maps a change to a record (false: none);
// an error fails the job.
func NewCDC[T any](opts CDCOptions, fn func(*Change) (T, bool, error)) (*CDC[T], error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, err := pgx.ParseConfig(opts.URL); err != nil {
		return nil, fmt.Errorf("postgres CDC: cannot parse URL: %v", redact(err))
	}
	return &CDC[T]{opts: opts, fn: fn}, nil
}

// Changes returns the source of Change records.
func Changes(opts CDCOptions) (*CDC[Change], error) {
	return NewCDC(opts, func(c *Change) (Change, bool, error) { return *c, true, nil })
}

var _ connector.Source[int] = (*CDC[int])(nil)

// Boundedness implements connector.Source.
func (s *CDC[T]) Boundedness() connector.Boundedness {
	if s.opts.StopAtCurrent {
		return connector.Bounded
	}
	return connector.Unbounded
}

// position is a split's position.
type position struct {
	// LSN: every transaction whose commit ends at or before it is read.
	LSN uint64 `json:"lsn"`
	// Skip changes of the next transaction were read.
	Skip int `json:"skip,omitempty"`
	// Stop, when not 0, ends the source at this LSN.
	Stop uint64 `json:"stop,omitempty"`
}

// Splits implements connector.Source: one split, read by subtask 0.
func (s *CDC[T]) Splits(ctx context.Context, parallelism int) ([]connector.SplitState, error) {
	if err := s.Check(ctx); err != nil {
		return nil, err
	}
	return []connector.SplitState{{ID: "slot-" + s.opts.Slot}}, nil
}

// Check connects and checks that capture can work: wal_level, the
// tables, the columns, the slot not in use by another client.
func (s *CDC[T]) Check(ctx context.Context) error {
	c, err := connect(ctx, s.opts.URL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return s.check(ctx, c)
}

func (s *CDC[T]) check(ctx context.Context, c *pgx.Conn) error {
	var wal string
	if err := c.QueryRow(ctx, "SELECT current_setting('wal_level')").Scan(&wal); err != nil {
		return fmt.Errorf("read wal_level: %v", pgMessage(err))
	}
	if wal != "logical" {
		cfg := c.Config()
		return fmt.Errorf("PostgreSQL at %s has wal_level = %s: change data capture needs wal_level = logical (postgresql.conf or ALTER SYSTEM SET wal_level = logical, then restart the server)", addr(cfg.Host, cfg.Port), wal)
	}
	for _, t := range s.opts.Tables {
		if _, err := c.Exec(ctx, "SELECT $1::regclass", t); err != nil {
			return fmt.Errorf("table %s: %v", t, pgMessage(err))
		}
	}
	for _, col := range s.opts.Columns {
		var typ string
		err := c.QueryRow(ctx, "SELECT t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = $1::regclass AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped", col.Table, col.Name).Scan(&typ)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("table %s has no column %s", col.Table, col.Name)
		}
		if err != nil {
			return fmt.Errorf("table %s, column %s: %v", col.Table, col.Name, pgMessage(err))
		}
		if col.Types != "" && !typeMatches(col.Types, typ) {
			return fmt.Errorf("table %s, column %s is of type %s: use a column of type %s", col.Table, col.Name, typ, strings.ReplaceAll(col.Types, "|", " or "))
		}
	}
	// A process of this job killed a moment ago may still hold the slot
	// until the server notices: wait a little before calling it taken.
	var pid *int32
	for deadline := time.Now().Add(slotWait); ; {
		pid = nil
		err := c.QueryRow(ctx, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", s.opts.Slot).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("replication slot %s: %v", s.opts.Slot, pgMessage(err))
		}
		if pid == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pid != nil {
		return fmt.Errorf("replication slot %s is in use by another client (server process %d): stop it, or give this job another slot", s.opts.Slot, *pid)
	}
	return nil
}

// NewReader implements connector.Source.
func (s *CDC[T]) NewReader(ctx connector.ReaderContext) (connector.Reader[T], error) {
	log := ctx.Logger
	if log == nil {
		log = slog.Default()
	}
	return &cdcReader[T]{s: s, log: log, avail: make(chan struct{}, 1), snaps: map[int64]uint64{}}, nil
}

// txn is a transaction received from the server, or (changes nil) a
// report that the server's position passed end with nothing to read.
type txn struct {
	end     uint64 // the commit's end LSN
	changes []*Change
}

type cdcReader[T any] struct {
	s   *CDC[T]
	log *slog.Logger

	split   *connector.SplitState
	pos     position
	noMore  bool
	started bool
	done    bool

	cur    *txn // being emitted
	curIdx int

	snaps     map[int64]uint64 // checkpoint id -> position LSN
	confirmed atomic.Uint64    // what the server may forget

	// the receiving goroutine
	repl   *pgconn.PgConn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	queue  []*txn
	err    error
	avail  chan struct{}
}

func (r *cdcReader[T]) AddSplits(splits []connector.SplitState) error {
	for i := range splits {
		if r.split != nil {
			return fmt.Errorf("postgres CDC: a reader reads one slot, given splits %s and %s", r.split.ID, splits[i].ID)
		}
		sp := splits[i]
		r.split = &sp
		if sp.Position != nil {
			if err := json.Unmarshal(sp.Position, &r.pos); err != nil {
				return fmt.Errorf("postgres CDC: slot %s: bad position %q in the checkpoint: %v", r.s.opts.Slot, sp.Position, err)
			}
		}
	}
	return nil
}

func (r *cdcReader[T]) NoMoreSplits() { r.noMore = true }

func (r *cdcReader[T]) Available() <-chan struct{} { return r.avail }

// slotWait is how long a slot in use may take to be released.
var slotWait = 3 * time.Second

// maxPerPoll bounds the changes one Poll emits.
const maxPerPoll = 4096

func (r *cdcReader[T]) Poll(out connector.Emitter[T]) (connector.Status, error) {
	if r.split == nil {
		if r.noMore {
			return connector.EndOfInput, nil
		}
		return connector.NothingAvailable, nil
	}
	if r.done {
		return connector.EndOfInput, nil
	}
	if !r.started {
		r.started = true
		if err := r.start(out); err != nil {
			return 0, err
		}
	}
	emitted := 0
	for emitted < maxPerPoll {
		if r.cur == nil {
			r.mu.Lock()
			if r.err != nil {
				err := r.err
				r.mu.Unlock()
				return 0, err
			}
			if len(r.queue) > 0 {
				r.cur, r.curIdx = r.queue[0], 0
				r.queue[0] = nil
				r.queue = r.queue[1:]
			}
			r.mu.Unlock()
			if r.cur == nil {
				break
			}
			if r.pos.Stop != 0 && r.cur.end > r.pos.Stop {
				// Committed after the stop position: the input ends here.
				r.cur, r.done = nil, true
				r.pos.LSN = max(r.pos.LSN, r.pos.Stop)
				return connector.EndOfInput, nil
			}
			if r.pos.Skip > 0 && r.cur.changes != nil {
				// Restored in the middle of this transaction.
				r.curIdx, r.pos.Skip = min(r.pos.Skip, len(r.cur.changes)), 0
			}
		}
		for r.curIdx < len(r.cur.changes) && emitted < maxPerPoll {
			c := r.cur.changes[r.curIdx]
			r.curIdx++
			emitted++
			if err := r.emit(out, c); err != nil {
				return 0, err
			}
		}
		if r.curIdx < len(r.cur.changes) {
			r.pos.Skip = r.curIdx
			return connector.MoreAvailable, nil
		}
		if r.cur.changes != nil {
			r.pos.LSN, r.pos.Skip = max(r.pos.LSN, r.cur.end), 0
		} else if r.pos.Skip == 0 {
			// The server passed this position with nothing for us. (With
			// Skip set, the transaction read in part is still to come.)
			r.pos.LSN = max(r.pos.LSN, r.cur.end)
		}
		r.cur = nil
	}
	if r.pos.Stop != 0 && r.pos.LSN >= r.pos.Stop {
		r.done = true
		return connector.EndOfInput, nil
	}
	if emitted == maxPerPoll {
		return connector.MoreAvailable, nil
	}
	return connector.NothingAvailable, nil
}

func (r *cdcReader[T]) emit(out connector.Emitter[T], c *Change) error {
	rec, ok, err := r.s.fn(c)
	if err != nil {
		return fmt.Errorf("postgres CDC: table %s: %w", c.Table, err)
	}
	if ok {
		out.EmitAt(rec, c.CommitTime.UnixMilli())
	}
	return nil
}

// start creates what is missing (publication, slot), reads the initial
// snapshot and starts the stream.
func (r *cdcReader[T]) start(out connector.Emitter[T]) error {
	o := &r.s.opts
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := connect(ctx, o.URL)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if err := r.s.check(ctx, c); err != nil {
		return err
	}
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_publication WHERE pubname = $1)", o.Publication).Scan(&exists); err != nil {
		return fmt.Errorf("publication %s: %v", o.Publication, pgMessage(err))
	}
	if !exists {
		tables := make([]string, len(o.Tables))
		for i, t := range o.Tables {
			tables[i] = pgx.Identifier(strings.Split(t, ".")).Sanitize()
		}
		if _, err := c.Exec(ctx, "CREATE PUBLICATION "+o.Publication+" FOR TABLE "+strings.Join(tables, ", ")); err != nil {
			return fmt.Errorf("create publication %s: %v", o.Publication, pgMessage(err))
		}
	}
	var slotExists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1)", o.Slot).Scan(&slotExists); err != nil {
		return fmt.Errorf("replication slot %s: %v", o.Slot, pgMessage(err))
	}

	cfg, err := pgconn.ParseConfig(o.URL)
	if err != nil {
		return fmt.Errorf("cannot parse the PostgreSQL URL: %v", redact(err))
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open a replication connection to %s as user %s: %v", addr(cfg.Host, cfg.Port), cfg.User, pgMessage(err))
	}
	r.repl = repl

	fresh := r.split.Position == nil
	if fresh {
		if slotExists {
			// No checkpoint: the job starts over. A slot left by an
			// earlier run that never checkpointed has no snapshot to go
			// with it.
			r.log.Info("postgres CDC: dropping the slot of an earlier run that left no checkpoint", "slot", o.Slot)
			if err := pglogrepl.DropReplicationSlot(ctx, repl, o.Slot, pglogrepl.DropReplicationSlotOptions{}); err != nil {
				return fmt.Errorf("drop replication slot %s: %v", o.Slot, pgMessage(err))
			}
		}
		action := "EXPORT_SNAPSHOT"
		if o.NoSnapshot {
			action = "NOEXPORT_SNAPSHOT"
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, repl, o.Slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{SnapshotAction: action})
		if err != nil {
			if sqlState(err) == "55006" {
				return fmt.Errorf("replication slot %s is in use by another client: stop it, or give this job another slot", o.Slot)
			}
			if ctx.Err() != nil {
				return fmt.Errorf("create replication slot %s: not done within 60 s: the server waits for every transaction open at the start to end, prepared ones too (see pg_stat_activity and pg_prepared_xacts): %v", o.Slot, pgMessage(err))
			}
			return fmt.Errorf("create replication slot %s: %v", o.Slot, pgMessage(err))
		}
		lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return fmt.Errorf("replication slot %s: consistent point %q: %v", o.Slot, res.ConsistentPoint, err)
		}
		r.pos = position{LSN: uint64(lsn)}
		if o.StopAtCurrent {
			r.pos.Stop = uint64(lsn)
		}
		if !o.NoSnapshot {
			if err := r.snapshot(ctx, c, res.SnapshotName, out); err != nil {
				return err
			}
		}
	} else if !slotExists {
		return fmt.Errorf("replication slot %s does not exist: the changes after LSN %s that the checkpoint has not read are gone; start the job afresh (without --restore)", o.Slot, pglogrepl.LSN(r.pos.LSN))
	}
	if r.pos.Stop != 0 && r.pos.LSN >= r.pos.Stop {
		r.done = true
		return nil
	}
	err = pglogrepl.StartReplication(ctx, repl, o.Slot, pglogrepl.LSN(r.pos.LSN), pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + o.Publication + "'"}})
	if err != nil {
		if sqlState(err) == "55006" {
			return fmt.Errorf("replication slot %s is in use by another client: stop it, or give this job another slot", o.Slot)
		}
		return fmt.Errorf("start replication from slot %s: %v", o.Slot, pgMessage(err))
	}
	r.confirmed.Store(r.pos.LSN)
	rctx, rcancel := context.WithCancel(context.Background())
	r.cancel = rcancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := r.receive(rctx)
		if err != nil && rctx.Err() == nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			r.signal()
		}
	}()
	return nil
}

// snapshot emits the tables' rows as of the slot's exported snapshot.
func (r *cdcReader[T]) snapshot(ctx context.Context, c *pgx.Conn, name string, out connector.Emitter[T]) error {
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("snapshot: %v", pgMessage(err))
	}
	if _, err := c.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+name+"'"); err != nil {
		return fmt.Errorf("snapshot: %v", pgMessage(err))
	}
	now := time.Now()
	for _, t := range r.s.opts.Tables {
		var qualified string
		if err := c.QueryRow(ctx, "SELECT $1::regclass::text", t).Scan(&qualified); err != nil {
			return fmt.Errorf("table %s: %v", t, pgMessage(err))
		}
		if !strings.Contains(qualified, ".") {
			var schema string
			_ = c.QueryRow(ctx, "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass", t).Scan(&schema)
			qualified = schema + "." + qualified
		}
		rows, err := c.Query(ctx, "SELECT * FROM "+pgx.Identifier(strings.Split(t, ".")).Sanitize())
		if err != nil {
			return fmt.Errorf("snapshot of table %s: %v", t, pgMessage(err))
		}
		fields := rows.FieldDescriptions()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return fmt.Errorf("snapshot of table %s: %v", t, pgMessage(err))
			}
			row := make(map[string]any, len(vals))
			for i, f := range fields {
				row[f.Name] = vals[i]
			}
			if err := r.emit(out, &Change{Kind: Read, Table: qualified, LSN: r.pos.LSN, CommitTime: now, New: row}); err != nil {
				rows.Close()
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("snapshot of table %s: %v", t, pgMessage(err))
		}
	}
	_, err := c.Exec(ctx, "COMMIT")
	return err
}

func (r *cdcReader[T]) signal() {
	select {
	case r.avail <- struct{}{}:
	default:
	}
}

func (r *cdcReader[T]) push(t *txn) {
	r.mu.Lock()
	r.queue = append(r.queue, t)
	r.mu.Unlock()
	r.signal()
}

// receive runs on the reader's goroutine: it decodes the stream into
// transactions and reports the confirmed position to the server.
func (r *cdcReader[T]) receive(ctx context.Context) error {
	o := &r.s.opts
	typeMap := pgtype.NewMap()
	relations := map[uint32]*pglogrepl.RelationMessage{}
	var cur *txn
	var curTime time.Time
	var curLSN uint64
	interval := o.StatusInterval
	if r.pos.Stop != 0 {
		interval = min(interval, 200*time.Millisecond) // ask for the server's position often
	}
	next := time.Now()
	decode := func(rel *pglogrepl.RelationMessage, td *pglogrepl.TupleData) (map[string]any, error) {
		if td == nil {
			return nil, nil
		}
		row := make(map[string]any, len(td.Columns))
		for i, col := range td.Columns {
			if i >= len(rel.Columns) {
				break
			}
			rc := rel.Columns[i]
			switch col.DataType {
			case 'n':
				row[rc.Name] = nil
			case 't':
				if dt, ok := typeMap.TypeForOID(rc.DataType); ok {
					v, err := dt.Codec.DecodeValue(typeMap, rc.DataType, pgtype.TextFormatCode, col.Data)
					if err != nil {
						return nil, fmt.Errorf("table %s.%s, column %s: %v", rel.Namespace, rel.RelationName, rc.Name, err)
					}
					row[rc.Name] = v
				} else {
					row[rc.Name] = string(col.Data)
				}
			}
		}
		return row, nil
	}
	for {
		if time.Now().After(next) {
			err := pglogrepl.SendStandbyStatusUpdate(ctx, r.repl, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: pglogrepl.LSN(r.confirmed.Load()), ReplyRequested: r.pos.Stop != 0})
			if err != nil {
				return fmt.Errorf("replication slot %s: status update: %v", o.Slot, pgMessage(err))
			}
			next = time.Now().Add(interval)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := r.repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("replication slot %s: %v", o.Slot, pgMessage(err))
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication slot %s: %s (SQLSTATE %s)", o.Slot, msg.Message, msg.Code)
		case *pgproto3.CopyData:
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("replication slot %s: %v", o.Slot, err)
				}
				if cur == nil && uint64(ka.ServerWALEnd) > curLSN {
					curLSN = uint64(ka.ServerWALEnd)
					r.push(&txn{end: curLSN})
				}
				if ka.ReplyRequested {
					next = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("replication slot %s: %v", o.Slot, err)
				}
				lm, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					return fmt.Errorf("replication slot %s: %v", o.Slot, err)
				}
				var ch *Change
				switch m := lm.(type) {
				case *pglogrepl.RelationMessage:
					relations[m.RelationID] = m
				case *pglogrepl.BeginMessage:
					cur, curTime = &txn{}, m.CommitTime
					curLSN = uint64(m.FinalLSN)
				case *pglogrepl.CommitMessage:
					if cur != nil {
						cur.end = uint64(m.TransactionEndLSN)
						curLSN = cur.end
						r.push(cur)
						cur = nil
					}
				case *pglogrepl.InsertMessage:
					ch, err = r.change(relations, m.RelationID, Insert, nil, m.Tuple, decode)
				case *pglogrepl.UpdateMessage:
					ch, err = r.change(relations, m.RelationID, Update, m.OldTuple, m.NewTuple, decode)
				case *pglogrepl.DeleteMessage:
					ch, err = r.change(relations, m.RelationID, Delete, m.OldTuple, nil, decode)
				}
				if err != nil {
					return err
				}
				if ch != nil && cur != nil {
					ch.LSN, ch.CommitTime = curLSN, curTime
					cur.changes = append(cur.changes, ch)
				}
			}
		}
	}
}

func (r *cdcReader[T]) change(rels map[uint32]*pglogrepl.RelationMessage, id uint32, kind ChangeKind, oldT, newT *pglogrepl.TupleData,
	decode func(*pglogrepl.RelationMessage, *pglogrepl.TupleData) (map[string]any, error)) (*Change, error) {
	rel, ok := rels[id]
	if !ok {
		return nil, fmt.Errorf("replication slot %s: change of unknown relation %d", r.s.opts.Slot, id)
	}
	o, err := decode(rel, oldT)
	if err != nil {
		return nil, err
	}
	n, err := decode(rel, newT)
	if err != nil {
		return nil, err
	}
	return &Change{Kind: kind, Table: rel.Namespace + "." + rel.RelationName, Old: o, New: n}, nil
}

// Snapshot implements connector.Reader.
func (r *cdcReader[T]) Snapshot(checkpointID int64) ([]connector.SplitState, error) {
	if r.split == nil || (r.done && r.cur == nil) {
		return nil, nil
	}
	sp := *r.split
	if r.started {
		p, _ := json.Marshal(r.pos)
		sp.Position = p
		r.snaps[checkpointID] = r.pos.LSN
	}
	return []connector.SplitState{sp}, nil
}

// NotifyCheckpointComplete implements connector.CheckpointListener: the
// slot may now forget what the checkpoint covers.
func (r *cdcReader[T]) NotifyCheckpointComplete(id int64) error {
	for cid, lsn := range r.snaps {
		if cid <= id {
			if lsn > r.confirmed.Load() {
				r.confirmed.Store(lsn)
			}
			delete(r.snaps, cid)
		}
	}
	return nil
}

var _ connector.CheckpointListener = (*cdcReader[int])(nil)

// Close stops the goroutine and closes the replication connection.
func (r *cdcReader[T]) Close() error {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	if r.repl != nil {
		_ = r.repl.Close(context.Background())
		r.repl = nil
	}
	return nil
}
