package metrics

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MinWatermark is the watermark before the first one (as
// internal/watermark.MinWatermark).
const MinWatermark = math.MinInt64

// Status is a subtask's status, with Flink's ExecutionState names.
type Status int32

// Subtask statuses, in the order a subtask goes through them.
const (
	Created Status = iota
	Initializing
	Running
	Finished
	Canceled
	Failed
)

var statusNames = [...]string{"CREATED", "INITIALIZING", "RUNNING", "FINISHED", "CANCELED", "FAILED"}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "UNKNOWN"
}

// Terminal reports whether s is an end state.
func (s Status) Terminal() bool { return s >= Finished }

// Task holds one subtask's figures. The counters are written by the task's
// goroutine and may be read by any goroutine at any time; the identity
// fields are set by NewTask and never change.
type Task struct {
	// ID is the task's id, "<vertex>-<subtask>".
	ID string
	// Vertex is the id of the task's vertex.
	Vertex string
	// Name is the vertex's name, "a -> b".
	Name        string
	Subtask     int
	Parallelism int
	// Operators are the names of the chain's operators, head first.
	Operators []string

	// RecordsIn counts the records taken from the task's input channels
	// (0 for sources); RecordsOut the records sent by its record writers
	// (0 for sinks). Added to once per batch.
	RecordsIn, RecordsOut atomic.Int64
	// BackPressuredNanos is the time spent waiting for room in a full
	// output queue; IdleNanos the time spent waiting for input (or, in a
	// source, for its reader to have data).
	BackPressuredNanos, IdleNanos atomic.Int64
	// InputWatermark is the watermark of the task's inputs (for sources,
	// the watermark their reader generated); OutputWatermark the last one
	// sent downstream. MinWatermark before the first.
	InputWatermark, OutputWatermark atomic.Int64

	status     atomic.Int32
	start, end atomic.Int64 // Unix nanoseconds; 0 before

	mu                  sync.Mutex // guards the rates and the counters' wiring
	backPressured, idle Rate
	// counters are the task's operator counters, in creation order;
	// opIn[i] and opOut[i] those whose sum is operator i's records in and
	// out (opIn[0] is unused: the head's records in are RecordsIn).
	counters    []*Counter
	opIn, opOut [][]*Counter
	// bytesIn and bytesOut are the byte counters of the task's network
	// channels (AddNetworkBytes).
	bytesIn, bytesOut []*atomic.Int64
}

// Counter counts the records an operator emits on one output. N is a
// plain integer that only the task's goroutine touches: it adds 1 per
// record (no atomic instruction, no shared cache line) and publishes N
// for readers with Task.Publish, once per batch or wait of its loop.
type Counter struct {
	N   int64
	pub atomic.Int64
}

// Load returns the count last published.
func (c *Counter) Load() int64 { return c.pub.Load() }

// NewCounter returns a counter of the records operator from (an index in
// Operators; -1 for none) emits on one of its outputs, which are also the
// records in of the chained operators to (the operators fed directly by
// that output; a chained operator has exactly one input). Called while the
// task is built, before it runs. It panics on an index out of range (a
// wiring bug).
func (t *Task) NewCounter(from int, to []int) *Counter {
	c := &Counter{}
	t.AddCounter(c, from, to)
	return c
}

// AddCounter is NewCounter with a counter of the caller's (e.g. a field of
// an operator that counts the records it receives).
func (t *Task) AddCounter(c *Counter, from int, to []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.Operators)
	if t.opIn == nil {
		t.opIn, t.opOut = make([][]*Counter, n), make([][]*Counter, n)
	}
	t.counters = append(t.counters, c)
	if from >= 0 {
		t.opOut[from] = append(t.opOut[from], c)
	}
	for _, i := range to {
		t.opIn[i] = append(t.opIn[i], c)
	}
}

// AddNetworkBytes adds the byte counters of one of the task's network
// channels to its figures (nil for the side it does not have): in counts
// the payload bytes an input channel received, out those an output
// channel sent (internal/network's ChannelMetrics.BytesIn and BytesOut,
// which the network adds to). The task's BytesIn and BytesOut are their
// sums. Called while the task is built, before it runs.
func (t *Task) AddNetworkBytes(in, out *atomic.Int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if in != nil {
		t.bytesIn = append(t.bytesIn, in)
	}
	if out != nil {
		t.bytesOut = append(t.bytesOut, out)
	}
}

// Publish makes the counters' current values visible to readers. Only the
// task's goroutine may call it.
func (t *Task) Publish() {
	for _, c := range t.counters {
		c.pub.Store(c.N)
	}
}

// NewTask returns the metrics of subtask subtask (of parallelism) of a
// vertex, in status CREATED.
func NewTask(id, vertex, name string, subtask, parallelism int, operators []string) *Task {
	t := &Task{ID: id, Vertex: vertex, Name: name, Subtask: subtask, Parallelism: parallelism,
		Operators: slices.Clone(operators)}
	t.InputWatermark.Store(MinWatermark)
	t.OutputWatermark.Store(MinWatermark)
	return t
}

// Start records that the task started at now and is initializing.
func (t *Task) Start(now time.Time) {
	t.start.Store(now.UnixNano())
	t.status.Store(int32(Initializing))
}

// SetStatus sets the status; a terminal one also records the end time.
func (t *Task) SetStatus(s Status, now time.Time) {
	if s.Terminal() {
		t.end.Store(now.UnixNano())
	}
	t.status.Store(int32(s))
}

// Status returns the current status.
func (t *Task) Status() Status { return Status(t.status.Load()) }

// TaskSnapshot is a consistent-enough copy of a task's figures: each
// counter is read atomically, not all of them at once.
type TaskSnapshot struct {
	Status          Status
	Start, End      time.Time // zero before
	RecordsIn       int64
	RecordsOut      int64
	BackPressured   time.Duration
	Idle            time.Duration
	Busy            time.Duration // since the start, neither idle nor backpressured
	InputWatermark  int64
	OutputWatermark int64
	// BytesIn and BytesOut are the payload bytes the task's network
	// channels received and sent (Flink's numBytesIn and numBytesOut); 0
	// for a task whose channels all stay in process.
	BytesIn, BytesOut  int64
	BackPressuredRatio float64 // recent share of time backpressured, 0 to 1
	IdleRatio          float64 // recent share of time idle, 0 to 1
	BusyRatio          float64 // 1 - the two others, while running
	// OperatorRecordsIn and OperatorRecordsOut are the records into and
	// out of each operator of the chain (indexed like Task.Operators), as
	// Flink's operator-scope numRecordsIn/numRecordsOut: the head's records
	// in are RecordsIn (0 in a source task), a chained operator's are the
	// records its upstream operator emitted to it, an operator's records out
	// are those it emitted on all its outputs (main and side; 0 for sinks).
	// They lag the counting by at most one batch (see Counter).
	OperatorRecordsIn, OperatorRecordsOut []int64
}

// Snapshot returns the task's figures at now. The ratios are measured over
// the last RateWindow to 2*RateWindow (see Rate); they are 0 once the task
// ended.
func (t *Task) Snapshot(now time.Time) TaskSnapshot {
	s := TaskSnapshot{
		Status:          t.Status(),
		Start:           unixNano(t.start.Load()),
		End:             unixNano(t.end.Load()),
		RecordsIn:       t.RecordsIn.Load(),
		RecordsOut:      t.RecordsOut.Load(),
		BackPressured:   time.Duration(t.BackPressuredNanos.Load()),
		Idle:            time.Duration(t.IdleNanos.Load()),
		InputWatermark:  t.InputWatermark.Load(),
		OutputWatermark: t.OutputWatermark.Load(),
	}
	s.OperatorRecordsIn, s.OperatorRecordsOut = t.operatorRecords(s.RecordsIn)
	s.BytesIn, s.BytesOut = t.networkBytes()
	if s.Start.IsZero() {
		return s
	}
	until := now
	if !s.End.IsZero() {
		until = s.End
	}
	s.Busy = max(0, until.Sub(s.Start)-s.BackPressured-s.Idle)
	if s.Status != Running {
		return s
	}
	t.mu.Lock()
	s.BackPressuredRatio = t.backPressured.Observe(s.Start, now, int64(s.BackPressured))
	s.IdleRatio = t.idle.Observe(s.Start, now, int64(s.Idle))
	t.mu.Unlock()
	s.BackPressuredRatio = clamp01(s.BackPressuredRatio)
	s.IdleRatio = clamp01(min(s.IdleRatio, 1-s.BackPressuredRatio))
	s.BusyRatio = clamp01(1 - s.BackPressuredRatio - s.IdleRatio)
	return s
}

// operatorRecords sums the published counters per operator.
func (t *Task) operatorRecords(headIn int64) (in, out []int64) {
	n := len(t.Operators)
	if n == 0 {
		return nil, nil
	}
	in, out = make([]int64, n), make([]int64, n)
	in[0] = headIn
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.opIn {
		if i > 0 {
			for _, c := range t.opIn[i] {
				in[i] += c.Load()
			}
		}
		for _, c := range t.opOut[i] {
			out[i] += c.Load()
		}
	}
	return in, out
}

// networkBytes sums the byte counters of the task's network channels.
func (t *Task) networkBytes() (in, out int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.bytesIn {
		in += c.Load()
	}
	for _, c := range t.bytesOut {
		out += c.Load()
	}
	return in, out
}

func unixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func clamp01(f float64) float64 { return min(max(f, 0), 1) }

// RateWindow is the shortest period a Rate measures over.
const RateWindow = 2 * time.Second

// Rate turns a growing total (nanoseconds of some activity) into the
// recent share of time it grew by, from samples taken when it is read. It
// is a pure value: the caller passes the clock and serializes calls.
type Rate struct {
	base, mid sample
}

type sample struct {
	at    time.Time
	value int64
}

// Observe records total at now and returns its growth per nanosecond since
// a sample between RateWindow and 2*RateWindow old (or since start, the
// moment the total was 0, while none is that old; or since the last read,
// when reads are further apart).
func (r *Rate) Observe(start, now time.Time, total int64) float64 {
	if r.base.at.IsZero() {
		r.base = sample{at: start}
		r.mid = r.base
	}
	if now.Sub(r.mid.at) >= RateWindow {
		r.base, r.mid = r.mid, sample{at: now, value: total}
	}
	d := now.Sub(r.base.at)
	if d <= 0 {
		return 0
	}
	return float64(total-r.base.value) / float64(d)
}

// Job holds the tasks of a job's current attempt. Safe for concurrent use.
type Job struct {
	// ID and Name identify the job.
	ID, Name string

	mu      sync.Mutex
	attempt int
	tasks   []*Task
}

// NewJob returns the metrics of a job with no tasks yet.
func NewJob(id, name string) *Job { return &Job{ID: id, Name: name} }

// SetTasks replaces the tasks with those of a new attempt (numbered from
// 0). Figures start again from zero with each attempt, as in Flink.
func (j *Job) SetTasks(attempt int, tasks []*Task) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.attempt, j.tasks = attempt, slices.Clone(tasks)
}

// Tasks returns the tasks of the current attempt and its number.
func (j *Job) Tasks() (attempt int, tasks []*Task) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.attempt, slices.Clone(j.tasks)
}

// Vertex sums the figures of one vertex's subtasks.
type Vertex struct {
	ID   string
	Name string
	// Subtasks are the vertex's subtasks' snapshots, by subtask index.
	Subtasks []TaskSnapshot
	// Status is the vertex's aggregated status: the "least advanced"
	// running status, or the terminal status when all subtasks ended (a
	// failure wins over a cancellation, which wins over finishing).
	Status                    Status
	Start, End                time.Time
	RecordsIn, RecordsOut     int64
	BackPressured, Idle, Busy time.Duration
	MaxBackPressuredRatio     float64 // of the most backpressured subtask
	MinInputWatermark         int64   // the vertex's input watermark
	MinOutputWatermark        int64
	Operators                 []string
	// OperatorRecordsIn and OperatorRecordsOut sum the subtasks' figures
	// per operator (see TaskSnapshot).
	OperatorRecordsIn, OperatorRecordsOut []int64
}

// Vertices groups the current attempt's tasks by vertex, in the order of
// their first task, and sums them at now.
func (j *Job) Vertices(now time.Time) []Vertex {
	_, tasks := j.Tasks()
	var out []Vertex
	index := map[string]int{}
	for _, t := range tasks {
		i, ok := index[t.Vertex]
		if !ok {
			i = len(out)
			index[t.Vertex] = i
			out = append(out, Vertex{ID: t.Vertex, Name: t.Name, Operators: t.Operators,
				Subtasks: make([]TaskSnapshot, t.Parallelism), MinInputWatermark: math.MaxInt64, MinOutputWatermark: math.MaxInt64,
				OperatorRecordsIn: make([]int64, len(t.Operators)), OperatorRecordsOut: make([]int64, len(t.Operators))})
		}
		v := &out[i]
		s := t.Snapshot(now)
		if t.Subtask >= 0 && t.Subtask < len(v.Subtasks) {
			v.Subtasks[t.Subtask] = s
		}
		v.RecordsIn += s.RecordsIn
		v.RecordsOut += s.RecordsOut
		for k := range min(len(v.OperatorRecordsIn), len(s.OperatorRecordsIn)) {
			v.OperatorRecordsIn[k] += s.OperatorRecordsIn[k]
			v.OperatorRecordsOut[k] += s.OperatorRecordsOut[k]
		}
		v.BackPressured += s.BackPressured
		v.Idle += s.Idle
		v.Busy += s.Busy
		v.MaxBackPressuredRatio = max(v.MaxBackPressuredRatio, s.BackPressuredRatio)
		v.MinInputWatermark = min(v.MinInputWatermark, s.InputWatermark)
		v.MinOutputWatermark = min(v.MinOutputWatermark, s.OutputWatermark)
	}
	for i := range out {
		out[i].Status, out[i].Start, out[i].End = aggregate(out[i].Subtasks)
	}
	return out
}

// aggregate is a vertex's status and times from its subtasks'.
func aggregate(subs []TaskSnapshot) (Status, time.Time, time.Time) {
	var start, end time.Time
	allEnded := true
	least := Failed
	worst := Finished
	for _, s := range subs {
		if !s.Start.IsZero() && (start.IsZero() || s.Start.Before(start)) {
			start = s.Start
		}
		if s.End.After(end) {
			end = s.End
		}
		if !s.Status.Terminal() {
			allEnded = false
			least = min(least, s.Status)
		} else {
			worst = max(worst, s.Status)
		}
	}
	if allEnded && len(subs) > 0 {
		return worst, start, end
	}
	return least, start, time.Time{}
}
