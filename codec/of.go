package codec

import (
	"encoding"
	"fmt"
	"reflect"
	"unsafe"
)

// Of returns a codec for T, chosen once by reflection. Build it once, when
// the pipeline is set up, and reuse it: the returned codec does no
// reflection per value except for maps and types with binary methods (see
// below).
//
// For string, []byte, bool, int, int32, int64, uint32, uint64 and float64 Of
// returns the direct codec (String, Bytes, ...). Other types get a tree of
// codecs, one per type, built here; the package documentation describes the
// encoding of each kind. Supported are:
//
//   - bool, every integer and float size, complex64/128, string;
//   - named types whose underlying type is supported (type DeviceID string);
//   - structs, exported and unexported fields alike, in declaration order;
//   - arrays, slices, maps and pointers of supported types;
//   - types T where T or *T has AppendBinary (encoding.BinaryAppender) and
//     *T has UnmarshalBinary (encoding.BinaryUnmarshaler), such as time.Time.
//     These methods take precedence over the structural encoding, except in
//     structs that only have them by embedding. Because Codec.Append has no
//     error result, Append panics if AppendBinary fails.
//
// Maps are iterated and filled through package reflect on every call, since
// Go has no other way to range over a map whose type is unknown at compile
// time; the binary methods are reached through it too.
//
// Of returns an error wrapping ErrUnsupported, naming the offending type and
// the path to it, for channels, functions, interfaces, unsafe.Pointer and
// recursive types. Pass a hand-written Codec for those.
func Of[T any]() (Codec[T], error) {
	if c, ok := direct[T](); ok {
		return c, nil
	}
	t := reflect.TypeFor[T]()
	b := builder{
		building: map[reflect.Type]bool{},
		built:    map[reflect.Type]valueCodec{},
	}
	c, err := b.build(t, t.String())
	if err != nil {
		return nil, fmt.Errorf("codec.Of[%v]: %w; pass a custom Codec[%v] instead", t, err, t)
	}
	return reflectCodec[T]{typ: t, c: c}, nil
}

// direct returns the direct codec for the types that have one. The type
// switch boxes a zero T once, here, not per call; the direct codec is then
// returned as it is, with no adapter in front of it.
func direct[T any]() (Codec[T], bool) {
	var c any
	switch any(*new(T)).(type) {
	case string:
		c = String()
	case []byte:
		c = Bytes()
	case bool:
		c = Bool()
	case int:
		c = Int()
	case int32:
		c = Int32()
	case int64:
		c = Int64()
	case uint32:
		c = Uint32()
	case uint64:
		c = Uint64()
	case float64:
		c = Float64()
	default:
		return nil, false
	}
	return c.(Codec[T]), true
}

// valueCodec encodes and decodes the value of one fixed type that p points
// to. Of builds a tree of them, one per type, so that the per-record path is
// plain loads, stores and interface calls; only maps and binary methods need
// a reflect.Value.
//
// p must not be retained after the call returns: reflectCodec passes a
// pointer to its own stack frame (see noescape).
type valueCodec interface {
	appendAt(dst []byte, p unsafe.Pointer) []byte
	// decodeAt decodes into *p, overwriting every encoded part of it, and
	// returns the number of bytes used. Pointers, slices and maps are always
	// freshly allocated, so *p never shares memory with an earlier value.
	decodeAt(src []byte, p unsafe.Pointer) (int, error)
	// minSize is the fewest bytes any encoding of the type takes. Decoders
	// check a decoded element count against it before allocating, so that a
	// short malformed input cannot make them allocate gigabytes.
	minSize() int
}

// reflectCodec adapts a tree of valueCodecs to Codec[T].
type reflectCodec[T any] struct {
	typ reflect.Type
	c   valueCodec
}

func (r reflectCodec[T]) Append(dst []byte, v T) []byte {
	return r.c.appendAt(dst, noescape(unsafe.Pointer(&v)))
}

func (r reflectCodec[T]) Decode(src []byte) (v T, n int, err error) {
	n, err = r.c.decodeAt(src, noescape(unsafe.Pointer(&v)))
	if err != nil {
		var zero T
		return zero, 0, fmt.Errorf("codec: decode %v: %w", r.typ, err)
	}
	return v, n, nil
}

// AppendFrom is Append of *v (PointerCodec).
func (r reflectCodec[T]) AppendFrom(dst []byte, v *T) []byte {
	return r.c.appendAt(dst, unsafe.Pointer(v))
}

// DecodeInto is Decode into *v (PointerCodec): v is zeroed first, so that
// nothing of an earlier value stays in it, and left zero on an error.
func (r reflectCodec[T]) DecodeInto(src []byte, v *T) (int, error) {
	var zero T
	*v = zero
	n, err := r.c.decodeAt(src, unsafe.Pointer(v))
	if err != nil {
		*v = zero
		return 0, fmt.Errorf("codec: decode %v: %w", r.typ, err)
	}
	return n, nil
}

// noescape hides p from escape analysis, as the runtime's function of the
// same name does. Without it the compiler, which cannot see through the
// valueCodec interface call, would move v to the heap and every Append and
// Decode of a composite type would allocate.
//
// It is safe because no valueCodec stores p, or a pointer derived from it,
// anywhere but in its own stack frame, where the runtime adjusts it when the
// stack moves: the map and binary-method codecs hand p to package reflect
// only to copy a value in or out, and the map codec detaches from p before
// it iterates. TestAppendDoesNotAllocate checks that the allocation stays
// away; TestStackGrowthDuringEncodeAndDecode, that a stack move mid-call
// does no harm.
//
// The round trip through a uintptr variable is what the compiler does not
// follow; reading the variable back as a pointer, rather than converting
// the uintptr, keeps go vet's unsafeptr check satisfied. Nothing may move
// the stack between the two statements, or the pointer read back would
// point into the old, freed stack: hence the directives, as on the
// runtime's own NoEscape (internal/abi). Without //go:nocheckptr, a build
// with checkptr instrumentation (-race turns it on) calls
// runtime.checkptrAlignment for the conversion, and that call may grow and
// move the stack; Decode then wrote the value into the old stack and
// returned a zero value, and Append encoded whatever the freed stack held
// (TestStackMoveAtEveryDepth). //go:nosplit keeps the function itself from
// growing the stack, //go:norace keeps race calls out. The directives stop
// inlining only in instrumented builds: elsewhere the function is inlined
// and has no call at all.
//
//go:nosplit
//go:nocheckptr
//go:norace
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}

var (
	binaryAppenderType    = reflect.TypeFor[encoding.BinaryAppender]()
	binaryUnmarshalerType = reflect.TypeFor[encoding.BinaryUnmarshaler]()
)

// hasBinaryMethods reports whether values of t encode themselves with
// AppendBinary (on T or *T) and decode with UnmarshalBinary (on *T).
//
// A struct that embeds a type with these methods, such as time.Time, gets
// them promoted, and using them would silently drop every other field. Such
// structs are encoded field by field instead; the embedded field then uses
// its own methods. Reflection cannot tell a promoted method from one that the
// struct declares to override it, so an override is ignored too, which loses
// nothing.
func hasBinaryMethods(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	if !pt.Implements(binaryAppenderType) || !pt.Implements(binaryUnmarshalerType) {
		return false
	}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && (hasMethod(f.Type, binaryAppenderType) || hasMethod(f.Type, binaryUnmarshalerType)) {
				return false
			}
		}
	}
	return true
}

// hasMethod reports whether t or *t implements iface.
func hasMethod(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

// builder builds the valueCodec tree for one call of Of.
type builder struct {
	building map[reflect.Type]bool       // types on the current path, to catch recursion
	built    map[reflect.Type]valueCodec // finished codecs, shared by every use of a type
}

// build returns the codec for t. path names where t sits inside the type
// given to Of, for error messages.
func (b *builder) build(t reflect.Type, path string) (valueCodec, error) {
	if c, ok := b.built[t]; ok {
		return c, nil
	}
	if b.building[t] {
		return nil, unsupported(path, t, "the type refers to itself, and recursive types are not supported")
	}
	b.building[t] = true
	defer delete(b.building, t)

	c, err := b.buildUncached(t, path)
	if err != nil {
		return nil, err
	}
	b.built[t] = c
	return c, nil
}

func (b *builder) buildUncached(t reflect.Type, path string) (valueCodec, error) {
	if hasBinaryMethods(t) {
		return binaryMethodsCodec{typ: t}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return boolCodec{}, nil
	case reflect.Int:
		return intCodec{}, nil
	case reflect.Int8:
		return int8Codec{}, nil
	case reflect.Int16:
		return int16Codec{}, nil
	case reflect.Int32:
		return int32Codec{}, nil
	case reflect.Int64:
		return int64Codec{}, nil
	case reflect.Uint:
		return uintCodec{}, nil
	case reflect.Uint8:
		return uint8Codec{}, nil
	case reflect.Uint16:
		return uint16Codec{}, nil
	case reflect.Uint32:
		return uint32Codec{}, nil
	case reflect.Uint64:
		return uint64Codec{}, nil
	case reflect.Uintptr:
		return uintptrCodec{}, nil
	case reflect.Float32:
		return float32Codec{}, nil
	case reflect.Float64:
		return float64Codec{}, nil
	case reflect.Complex64:
		return complex64Codec{}, nil
	case reflect.Complex128:
		return complex128Codec{}, nil
	case reflect.String:
		return stringCodec{}, nil
	case reflect.Struct:
		return b.buildStruct(t, path)
	case reflect.Array:
		return b.buildArray(t, path)
	case reflect.Slice:
		return b.buildSlice(t, path)
	case reflect.Map:
		return b.buildMap(t, path)
	case reflect.Pointer:
		elem, err := b.build(t.Elem(), path)
		if err != nil {
			return nil, err
		}
		return pointerCodec{elemType: t.Elem(), elem: elem}, nil
	case reflect.Chan:
		return nil, unsupported(path, t, "channels cannot be encoded")
	case reflect.Func:
		return nil, unsupported(path, t, "functions cannot be encoded")
	case reflect.Interface:
		return nil, unsupported(path, t, "an interface does not say which concrete type to decode")
	case reflect.UnsafePointer:
		return nil, unsupported(path, t, "unsafe pointers cannot be encoded")
	}
	return nil, unsupported(path, t, fmt.Sprintf("kind %v is unknown", t.Kind()))
}

func unsupported(path string, t reflect.Type, why string) error {
	if path == t.String() {
		return fmt.Errorf("type %v: %s: %w", t, why, ErrUnsupported)
	}
	return fmt.Errorf("%s (type %v): %s: %w", path, t, why, ErrUnsupported)
}

func (b *builder) buildStruct(t reflect.Type, path string) (valueCodec, error) {
	c := &structCodec{}
	for i := range t.NumField() {
		f := t.Field(i)
		// Blank fields cannot be set or read and == ignores them; zero-size
		// fields (struct{}, [0]func() markers) hold no data. Skipping both
		// also lets such markers be of any type.
		if f.Name == "_" || f.Type.Size() == 0 {
			continue
		}
		fc, err := b.build(f.Type, path+"."+f.Name)
		if err != nil {
			return nil, err
		}
		c.fields = append(c.fields, structField{name: f.Name, offset: f.Offset, codec: fc})
		c.min += fc.minSize()
	}
	return c, nil
}

func (b *builder) buildArray(t reflect.Type, path string) (valueCodec, error) {
	elem := t.Elem()
	if t.Len() == 0 || elem.Size() == 0 {
		return arrayCodec{}, nil // no data, whatever the element type
	}
	if elem.Kind() == reflect.Uint8 && !hasBinaryMethods(elem) {
		return byteArrayCodec{n: t.Len()}, nil
	}
	ec, err := b.build(elem, path+"[]")
	if err != nil {
		return nil, err
	}
	return arrayCodec{elem: ec, elemSize: elem.Size(), n: t.Len()}, nil
}

func (b *builder) buildSlice(t reflect.Type, path string) (valueCodec, error) {
	elem := t.Elem()
	if elem.Kind() == reflect.Uint8 && !hasBinaryMethods(elem) {
		return bytesCodec{}, nil
	}
	ec, err := b.build(elem, path+"[]")
	if err != nil {
		return nil, err
	}
	if ec.minSize() == 0 && elem.Size() > 0 {
		// Such elements (structs of blank fields) encode to nothing, so the
		// decoder could not bound the memory a length prefix asks for.
		return nil, unsupported(path, t, "its elements have no encoded fields")
	}
	return sliceCodec{typ: t, elem: ec, elemSize: elem.Size(), elemMin: ec.minSize()}, nil
}

func (b *builder) buildMap(t reflect.Type, path string) (valueCodec, error) {
	kc, err := b.build(t.Key(), path+"[key]")
	if err != nil {
		return nil, err
	}
	vc, err := b.build(t.Elem(), path+"[value]")
	if err != nil {
		return nil, err
	}
	return &mapCodec{typ: t, key: kc, val: vc}, nil
}
