package weir

import (
	"fmt"
	"reflect"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/internal/graph"
	"github.com/weirstream/weir/internal/runtime"
)

// Stream is a stream of records of type T.
//
// A Stream returned by an operator (Map, Process, ...) stands for that
// operator: Parallelism, UID and DisableChaining configure it. A Stream
// returned by Union, Rebalance, Broadcast or Forward stands for a way of
// connecting to the next operator and has no operator of its own.
type Stream[T any] struct {
	env     *Environment
	ports   []*port[T]
	node    *nodeBase // the operator producing the stream, nil for virtual streams
	part    graph.Partitioner
	partSet bool
}

// FromSource adds a source operator reading src. An optional watermark
// strategy gives records their event-time timestamps and generates
// watermarks per split, as Flink's fromSource does.
func (e *Environment) FromSource[T any](name string, src connector.Source[T], watermarks ...WatermarkStrategy[T]) *Stream[T] {
	n := &sourceNode[T]{src: src}
	switch len(watermarks) {
	case 0:
	case 1:
		if err := watermarks[0].validate(); err != nil {
			e.fail(fmt.Errorf("source %q: %w", name, err))
		}
		n.strategy = &watermarks[0]
	default:
		e.fail(fmt.Errorf("source %q: give at most one watermark strategy", name))
	}
	b := e.addNode(n, name, graph.Source, 0)
	n.out = &port[T]{node: b}
	if src == nil {
		e.fail(fmt.Errorf("source %q is nil", name))
	}
	return &Stream[T]{env: e, ports: []*port[T]{n.out}, node: b}
}

func (s *Stream[T]) operator(what string) *nodeBase {
	if s.node == nil {
		s.env.fail(fmt.Errorf("%s applies to an operator's output, not to a union or a repartitioned stream", what))
	}
	return s.node
}

// Parallelism sets the number of subtasks of the operator producing s.
func (s *Stream[T]) Parallelism(n int) *Stream[T] {
	if b := s.operator("Parallelism"); b != nil {
		if n < 1 {
			s.env.fail(fmt.Errorf("operator %q: parallelism %d, want >= 1", b.name, n))
		}
		b.parallelism = n
	}
	return s
}

// UID sets the stable id of the operator producing s, which matches its state
// across restarts. By default it is the operator's name (suffixed with -2,
// -3, ... for repeated names).
func (s *Stream[T]) UID(uid string) *Stream[T] {
	if b := s.operator("UID"); b != nil {
		if uid == "" {
			s.env.fail(fmt.Errorf("operator %q: empty uid", b.name))
			return s
		}
		if uid != b.uid && s.env.uids[uid] {
			s.env.fail(fmt.Errorf("operator %q: uid %q is already used by another operator", b.name, uid))
			return s
		}
		delete(s.env.uids, b.uid)
		b.uid = uid
		s.env.uids[uid] = true
	}
	return s
}

// DisableChaining runs the operator producing s in a task of its own.
func (s *Stream[T]) DisableChaining() *Stream[T] {
	if b := s.operator("DisableChaining"); b != nil {
		b.noChain = true
	}
	return s
}

func (s *Stream[T]) repartition(p graph.Partitioner) *Stream[T] {
	return &Stream[T]{env: s.env, ports: s.ports, part: p, partSet: true}
}

// Rebalance sends the records to the next operator round-robin over its
// subtasks.
func (s *Stream[T]) Rebalance() *Stream[T] { return s.repartition(graph.Rebalance) }

// Broadcast sends every record to every subtask of the next operator.
func (s *Stream[T]) Broadcast() *Stream[T] { return s.repartition(graph.Broadcast) }

// Forward sends the records of subtask i to subtask i of the next operator,
// which must have the same parallelism.
func (s *Stream[T]) Forward() *Stream[T] { return s.repartition(graph.Forward) }

// Union merges s with other streams of the same type.
func (s *Stream[T]) Union(others ...*Stream[T]) *Stream[T] {
	u := &Stream[T]{env: s.env, part: s.part, partSet: s.partSet}
	u.ports = append(u.ports, s.ports...)
	for _, o := range others {
		if o.env != s.env {
			s.env.fail(fmt.Errorf("Union: streams belong to different environments"))
			continue
		}
		u.ports = append(u.ports, o.ports...)
	}
	return u
}

// connectTo adds edges from every port of s to the consumer.
func connectTo[T any](s *Stream[T], to consumer[T], input int) {
	for _, p := range s.ports {
		connectPort(p, to, input, s.part, s.partSet, nil)
	}
}

func addOneInput[IN, OUT any](s *Stream[IN], name string, keyed bool, mk func(env *opEnv, out runtime.Output[OUT]) oneInputOp[IN]) (*oneInputNode[IN, OUT], *Stream[OUT]) {
	n := &oneInputNode[IN, OUT]{make: mk}
	b := s.env.addNode(n, name, graph.Operator, 1)
	b.keyed = keyed
	n.out = &port[OUT]{node: b}
	return n, &Stream[OUT]{env: s.env, ports: []*port[OUT]{n.out}, node: b}
}

// Map applies fn to every record.
func (s *Stream[T]) Map[U any](name string, fn func(T) U) *Stream[U] {
	n, out := addOneInput(s, name, false, func(env *opEnv, out runtime.Output[U]) oneInputOp[T] {
		return newMapOp(fn, out, env)
	})
	connectTo(s, n, 0)
	return out
}

// FlatMap applies fn to every record; fn emits zero or more records.
func (s *Stream[T]) FlatMap[U any](name string, fn func(T, Collector[U])) *Stream[U] {
	n, out := addOneInput(s, name, false, func(env *opEnv, out runtime.Output[U]) oneInputOp[T] {
		return newFlatMapOp(fn, out, env)
	})
	connectTo(s, n, 0)
	return out
}

// Filter keeps the records for which keep returns true.
func (s *Stream[T]) Filter(name string, keep func(T) bool) *Stream[T] {
	n, out := addOneInput(s, name, false, func(env *opEnv, out runtime.Output[T]) oneInputOp[T] {
		return newFilterOp(keep, out, env)
	})
	connectTo(s, n, 0)
	return out
}

// Process applies a process function to every record. Each subtask gets its
// own shallow copy of fn (when fn is a pointer to a struct), so fields set in
// Open belong to one subtask.
func (s *Stream[T]) Process[U any](name string, fn ProcessFunction[T, U]) *Stream[U] {
	n, out := addOneInput(s, name, false, func(env *opEnv, out runtime.Output[U]) oneInputOp[T] {
		op := &processOp[T, U]{fn: cloneFunc(fn), ctx: &Context{env: env}, cur: env.cursor, idx: env.index}
		op.coll = newCollector(out, &op.ctx.ts, env)
		return op
	})
	connectTo(s, n, 0)
	return out
}

// SinkTo writes the records to sink. The returned sink stream configures the
// sink operator (Parallelism, UID).
func (s *Stream[T]) SinkTo(name string, sink connector.Sink[T]) *Stream[T] {
	if sink == nil {
		s.env.fail(fmt.Errorf("sink %q is nil", name))
	}
	n := &oneInputNode[T, struct{}]{make: func(env *opEnv, _ runtime.Output[struct{}]) oneInputOp[T] {
		return &sinkOp[T]{sink: sink, env: env}
	}}
	b := s.env.addNode(n, name, graph.Sink, 1)
	b.prepare = func(bc *buildCtx) error { return prepareSink(bc, b, sink) }
	b.sink = sink
	connectTo(s, n, 0)
	return &Stream[T]{env: s.env, node: b}
}

// OutputTag names a side output carrying records of type T.
type OutputTag[T any] struct{ id string }

// NewOutputTag returns the tag of a side output; id must be unique within
// the operator that emits to it.
func NewOutputTag[T any](id string) OutputTag[T] { return OutputTag[T]{id: id} }

// ID returns the tag's id.
func (t OutputTag[T]) ID() string { return t.id }

// SideOutput returns the stream of the records the operator producing s
// emits to tag (see the function SideOutput).
func (s *Stream[T]) SideOutput[X any](tag OutputTag[X]) *Stream[X] {
	b := s.operator("SideOutput")
	if b == nil {
		return &Stream[X]{env: s.env}
	}
	if b.sides == nil {
		b.sides = make(map[string]sidePort)
		b.sideTypes = make(map[string]reflect.Type)
	}
	typ := reflect.TypeFor[X]()
	if prev, ok := b.sideTypes[tag.id]; ok && prev != typ {
		s.env.fail(fmt.Errorf("operator %q: side output %q is used with types %v and %v", b.name, tag.id, prev, typ))
		return &Stream[X]{env: s.env}
	}
	p := &port[X]{node: b, tag: tag.id}
	// Several calls with the same tag each get their own port; the operator
	// emits to all of them.
	if prev, ok := b.sides[tag.id]; ok {
		b.sides[tag.id] = sidePorts{prev, p}
	} else {
		b.sides[tag.id] = p
	}
	b.sideTypes[tag.id] = typ
	return &Stream[X]{env: s.env, ports: []*port[X]{p}}
}

// sidePorts joins several ports of one tag.
type sidePorts []sidePort

func (ps sidePorts) sideOutput(bc *buildCtx, s int) any {
	outs := make([]any, len(ps))
	for i, p := range ps {
		outs[i] = p.sideOutput(bc, s)
	}
	return multiSide(outs)
}

type multiSide []any

// SideOutput returns the collector through which a process function emits
// to the side output tag. Call it in Open and keep the collector. When no
// stream consumes the tag, the collector drops what it receives.
func SideOutput[X any](ctx FunctionContext, tag OutputTag[X]) (Collector[X], error) {
	c := ctx.context()
	v, ok := c.env.sides[tag.id]
	if !ok {
		coll := newCollector[X](runtime.Discard[X]{}, &c.ts, c.env)
		return &coll, nil
	}
	if m, isMulti := v.(multiSide); isMulti {
		var outs runtime.FanOut[X]
		for _, o := range m {
			typed, ok := o.(runtime.Output[X])
			if !ok {
				return nil, fmt.Errorf("side output %q carries another type than %v", tag.id, reflect.TypeFor[X]())
			}
			outs = append(outs, typed)
		}
		coll := newCollector[X](outs, &c.ts, c.env)
		return &coll, nil
	}
	typed, ok := v.(runtime.Output[X])
	if !ok {
		return nil, fmt.Errorf("side output %q carries another type than %v", tag.id, reflect.TypeFor[X]())
	}
	coll := newCollector(typed, &c.ts, c.env)
	return &coll, nil
}

// cloneFunc returns a shallow copy of fn when it is a pointer to a struct, so
// that each subtask has its own fields; other values are returned as they are.
func cloneFunc[F any](fn F) F {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fn
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	if f, ok := c.Interface().(F); ok {
		return f
	}
	return fn
}
