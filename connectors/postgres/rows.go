package postgres

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"
)

// RowMapper turns a record into the values of one table row.
type RowMapper[T any] struct {
	// Columns are the table's columns the mapper fills, in the order of
	// Map's values. Required.
	Columns []string
	// Map writes rec's value of Columns[i] into dst[i] (len(dst) ==
	// len(Columns)). The values are encoded by pgx: string, []byte,
	// int64, float64, bool, time.Time, nil and the pgtype types. An error
	// fails the job. Required.
	Map func(rec T, dst []any) error
	// Types, when set, are the column types the mapper writes, one per
	// column ("" for any): a PostgreSQL type name (text, bigint, int8,
	// varchar, double precision, ...) or several separated by "|". The
	// sink refuses, at start, a table whose column has another type.
	Types []string
}

// FuncMapper is a RowMapper of a function.
func FuncMapper[T any](columns []string, fn func(rec T, dst []any) error) RowMapper[T] {
	return RowMapper[T]{Columns: columns, Map: fn}
}

// StructMapper maps the exported fields of struct type T (or *T) to
// columns: a field tagged `pg:"name"` goes to column name, `pg:"-"` is
// left out, and an untagged field goes to the snake_case of its name
// (UserID: user_id).
func StructMapper[T any]() (RowMapper[T], error) {
	t := reflect.TypeFor[T]()
	ptr := t.Kind() == reflect.Pointer
	if ptr {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return RowMapper[T]{}, fmt.Errorf("StructMapper: %v is not a struct: use FuncMapper", reflect.TypeFor[T]())
	}
	var cols []string
	var idx [][]int
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name := f.Tag.Get("pg")
		if name == "-" {
			continue
		}
		if name == "" {
			name = snake(f.Name)
		}
		cols = append(cols, name)
		idx = append(idx, f.Index)
	}
	if len(cols) == 0 {
		return RowMapper[T]{}, fmt.Errorf("StructMapper: %v has no exported fields", t)
	}
	return RowMapper[T]{Columns: cols, Map: func(rec T, dst []any) error {
		v := reflect.ValueOf(&rec).Elem()
		if ptr {
			if v.IsNil() {
				return fmt.Errorf("nil *%v record", t)
			}
			v = v.Elem()
		}
		for i, ix := range idx {
			dst[i] = v.FieldByIndex(ix).Interface()
		}
		return nil
	}}, nil
}

func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// typeAliases maps SQL type names to the names pgx's type map uses.
var typeAliases = map[string]string{
	"bigint": "int8", "integer": "int4", "int": "int4", "smallint": "int2",
	"character varying": "varchar", "double precision": "float8", "real": "float4",
	"boolean": "bool", "timestamp with time zone": "timestamptz", "timestamp without time zone": "timestamp",
	"character": "bpchar", "char": "bpchar", "decimal": "numeric",
}

// typeMatches reports whether the type named have is one of want's.
func typeMatches(want, have string) bool {
	for _, w := range strings.Split(want, "|") {
		w = strings.TrimSpace(strings.ToLower(w))
		if a, ok := typeAliases[w]; ok {
			w = a
		}
		if w == have {
			return true
		}
	}
	return false
}
