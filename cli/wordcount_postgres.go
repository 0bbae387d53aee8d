package cli

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/weirstream/weir/connector"
	"github.com/weirstream/weir/connectors/postgres"
)

// The postgres:// endpoints of `weir run wordcount`:
//
//	--output postgres://USER@HOST:PORT/DB?table=T[&mode=upsert][&guarantee=at-least-once]
//	--input  postgres://USER@HOST:PORT/DB?table=T&column=C[&stop=current][&slot=S][&publication=P]
//
// The output's rows are (word text, count bigint), the table created if
// missing (with mode=upsert, word is its primary key and each word's row
// holds its latest count). The input reads column C of table T: the
// table's rows at the first start, then each inserted row, through logical
// replication; stop=current ends at the WAL position of the first start.
// Every other query parameter goes to the PostgreSQL driver (sslmode, ...).

func init() {
	registerOutput("postgres", postgresOutput)
	registerInput("postgres", postgresInput)
}

// pgParams takes the named parameters out of u's query and returns the
// rest of the URL, for the driver.
func pgParams(u *url.URL, names ...string) (map[string]string, string, error) {
	q := u.Query()
	got := map[string]string{}
	for _, n := range names {
		if len(q[n]) > 1 {
			return nil, "", fmt.Errorf("%s is given %d times", n, len(q[n]))
		}
		got[n] = q.Get(n)
		q.Del(n)
	}
	for k := range q {
		if k == "" {
			return nil, "", fmt.Errorf("empty query parameter in %s", u.Redacted())
		}
	}
	rest := *u
	rest.RawQuery = q.Encode()
	return got, rest.String(), nil
}

func postgresOutput(ctx context.Context, u *url.URL, exactlyOnce bool, _ wordCountFlags) (connector.Sink[string], error) {
	p, connURL, err := pgParams(u, "table", "mode", "guarantee")
	if err != nil {
		return nil, err
	}
	table := p["table"]
	if table == "" {
		return nil, fmt.Errorf("%s: add ?table=NAME, the table of the (word, count) rows", u.Redacted())
	}
	opts := postgres.SinkOptions[string]{
		URL: connURL, Table: table,
		TransactionPrefix: "weir-wordcount-" + strings.NewReplacer(".", "_").Replace(table),
		Rows: postgres.RowMapper[string]{
			Columns: []string{"word", "count"},
			Types:   []string{"text|varchar", "bigint|integer|numeric"},
			Map: func(rec string, dst []any) error {
				w, c, ok := strings.Cut(rec, ",")
				n, err := strconv.ParseInt(c, 10, 64)
				if !ok || err != nil {
					return fmt.Errorf("record %q is not word,count", rec)
				}
				dst[0], dst[1] = w, n
				return nil
			},
		},
		Setup: "CREATE TABLE IF NOT EXISTS " + quoteTable(table) + " (word text, count bigint)",
	}
	switch p["mode"] {
	case "", "append":
	case "upsert":
		opts.Mode, opts.Key = postgres.Upsert, []string{"word"}
		opts.Setup = "CREATE TABLE IF NOT EXISTS " + quoteTable(table) + " (word text PRIMARY KEY, count bigint)"
	default:
		return nil, fmt.Errorf("mode=%s: use append or upsert", p["mode"])
	}
	switch p["guarantee"] {
	case "":
		if !exactlyOnce {
			opts.Guarantee = postgres.AtLeastOnce
		}
	case "exactly-once":
		if !exactlyOnce {
			return nil, fmt.Errorf("guarantee=exactly-once needs checkpoints: add --checkpoint-interval")
		}
	case "at-least-once":
		opts.Guarantee = postgres.AtLeastOnce
	default:
		return nil, fmt.Errorf("guarantee=%s: use exactly-once or at-least-once", p["guarantee"])
	}
	s, err := postgres.NewSink(opts)
	if err != nil {
		return nil, err
	}
	if err := s.Check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// quoteTable quotes a possibly schema-qualified table name.
func quoteTable(t string) string {
	parts := strings.Split(t, ".")
	for i, p := range parts {
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

func postgresInput(ctx context.Context, u *url.URL, _ wordCountFlags) (connector.Source[string], error) {
	p, connURL, err := pgParams(u, "table", "column", "stop", "slot", "publication")
	if err != nil {
		return nil, err
	}
	table, column := p["table"], p["column"]
	if table == "" || column == "" {
		return nil, fmt.Errorf("%s: add ?table=NAME&column=NAME, the table and the text column whose values are the lines", u.Redacted())
	}
	opts := postgres.CDCOptions{
		URL: connURL, Tables: []string{table}, Slot: p["slot"], Publication: p["publication"],
		Columns: []postgres.Column{{Table: table, Name: column, Types: "text|varchar|bpchar"}},
	}
	switch p["stop"] {
	case "":
	case "current":
		opts.StopAtCurrent = true
	default:
		return nil, fmt.Errorf("stop=%s: use stop=current (end at the WAL position of the first start) or leave it out", p["stop"])
	}
	if opts.Slot == "" {
		opts.Slot = "weir_wordcount_" + strings.ToLower(strings.NewReplacer(".", "_", "-", "_").Replace(table))
	}
	// Inserted rows (and the snapshot's) are lines; updates and deletes
	// are not.
	src, err := postgres.NewCDC(opts, func(c *postgres.Change) (string, bool, error) {
		if c.Kind != postgres.Read && c.Kind != postgres.Insert {
			return "", false, nil
		}
		v, ok := c.New[column]
		if !ok || v == nil {
			return "", false, nil
		}
		s, ok := v.(string)
		if !ok {
			return "", false, fmt.Errorf("column %s holds %T, not text", column, v)
		}
		return s, true, nil
	})
	if err != nil {
		return nil, err
	}
	if err := src.Check(ctx); err != nil {
		return nil, err
	}
	return src, nil
}
