package nexmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAppendJSON pins the format: the field names and order of the Flink
// DDL, times as epoch milliseconds, escapes.
func TestAppendJSON(t *testing.T) {
	tests := []struct {
		ev   Event
		want string
	}{
		{PersonOf(&Person{ID: 1000, Name: "Peter Jones", EmailAddress: "a@b.com", CreditCard: "0001 0002 0003 0004", City: "Bend", State: "OR", DateTime: 1436918400000, Extra: "x"}),
			`{"event_type":0,"person":{"id":1000,"name":"Peter Jones","emailAddress":"a@b.com","creditCard":"0001 0002 0003 0004","city":"Bend","state":"OR","dateTime":1436918400000,"extra":"x"}}`},
		{AuctionOf(&Auction{ID: 1001, ItemName: "a \"b\"", Description: "c\\d\n\x01", InitialBid: 100, Reserve: 200, DateTime: 5, Expires: 6, Seller: 1000, Category: 10, Extra: "é\xff"}),
			`{"event_type":1,"auction":{"id":1001,"itemName":"a \"b\"","description":"c\\d\n\u0001","initialBid":100,"reserve":200,"dateTime":5,"expires":6,"seller":1000,"category":10,"extra":"é\ufffd"}}`},
		{BidOf(Bid{Auction: 1000, Bidder: 1001, Price: -3, Channel: "Google", URL: "https://x/?a=1&b=2", DateTime: 7, Extra: ""}),
			`{"event_type":2,"bid":{"auction":1000,"bidder":1001,"price":-3,"channel":"Google","url":"https://x/?a=1&b=2","dateTime":7,"extra":""}}`},
	}
	for _, tt := range tests {
		if got := string(AppendJSON(nil, &tt.ev)); got != tt.want {
			t.Errorf("AppendJSON:\n got %s\nwant %s", got, tt.want)
		}
		if !json.Valid([]byte(tt.want)) {
			t.Errorf("not valid JSON: %s", tt.want)
		}
	}
}

// jsonEvent mirrors the format for encoding/json, which the tests trust.
type jsonEvent struct {
	EventType *int     `json:"event_type"`
	Person    *Person  `json:"person"`
	Auction   *Auction `json:"auction"`
	Bid       *jsonBid `json:"bid"`
}

type jsonBid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

// TestJSONRoundTrip writes generated events to a file and reads them back
// with the JSONFile source; encoding/json must read every line alike.
func TestJSONRoundTrip(t *testing.T) {
	const n = 10_000
	cfg := Config{Seed: 11, Rate: 2500}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	counts, err := WriteJSONFile(path, cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	want := generate(t, cfg, 0, n)
	var wantCounts Counts
	for _, ev := range want {
		wantCounts.add(ev.Type)
	}
	if counts != wantCounts {
		t.Errorf("counts = %+v, want %+v", counts, wantCounts)
	}
	got := runSource(t, JSONFile(path), 2)
	if len(got[1]) != 0 {
		t.Errorf("subtask 1 read %d events of a one-file source", len(got[1]))
	}
	if d := diffEvents(got[0], want); d != "" {
		t.Fatal(d)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))[:500] {
		var je jsonEvent
		if err := json.Unmarshal(line, &je); err != nil {
			t.Fatalf("line %d: encoding/json: %v", i+1, err)
		}
		if err := sameAsJSON(want[i], je); err != "" {
			t.Fatalf("line %d: %s", i+1, err)
		}
	}
}

// sameAsJSON compares an event with what encoding/json read.
func sameAsJSON(ev Event, je jsonEvent) string {
	switch {
	case je.EventType == nil || *je.EventType != int(ev.Type):
		return "event_type differs"
	case (je.Person != nil) != (ev.Type == PersonEvent) || je.Person != nil && *je.Person != *ev.Person:
		return "person differs"
	case (je.Auction != nil) != (ev.Type == AuctionEvent) || je.Auction != nil && *je.Auction != *ev.Auction:
		return "auction differs"
	case (je.Bid != nil) != (ev.Type == BidEvent) || je.Bid != nil && Bid(*je.Bid) != ev.Bid:
		return "bid differs"
	}
	return ""
}

func TestParseJSON(t *testing.T) {
	bid := `"bid":{"auction":1,"bidder":2,"price":3,"channel":"c","url":"u","dateTime":4,"extra":"e"}`
	ok := []struct {
		line string
		want Event
	}{
		{`{"event_type":2,` + bid + `}`, BidOf(Bid{1, 2, 3, "c", "u", 4, "e"})},
		{` { "bid" : {"extra":"e","dateTime":4,"url":"u","channel":"c","price":3,"bidder":2,"auction":1} , "event_type" : 2, "person":null, "auction": null }` + "\r",
			BidOf(Bid{1, 2, 3, "c", "u", 4, "e"})},
		{`{"event_type":0,"person":{"id":-1,"name":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t","emailAddress":"","creditCard":"","city":"","state":"","dateTime":0,"extra":"\ud800"}}`,
			PersonOf(&Person{ID: -1, Name: "é😀\"\\/\b\f\n\r\t", Extra: "\ufffd"})},
	}
	for _, tt := range ok {
		got, err := ParseJSON([]byte(tt.line))
		if err != nil {
			t.Errorf("ParseJSON(%s): %v", tt.line, err)
		} else if !eventEqual(got, tt.want) {
			t.Errorf("ParseJSON(%s) = %s", tt.line, AppendJSON(nil, &got))
		}
	}
	bad := []struct {
		line, wantErr string
	}{
		{``, "column 1: unexpected end of the line (is the file truncated?)"},
		{`{"event_type":2,"bid":{"auction":1,"bidder":2,"pri`, "column 51: unexpected end of the line (is the file truncated?)"},
		{`{"event_type":2,` + bid, "unexpected end of the line"},
		{`[1]`, "column 1: expected an event object"},
		{`{"event_type":3}`, "column 15: event_type must be 0 (person), 1 (auction) or 2 (bid), got 3"},
		{`{"event_type":"2",` + bid + `}`, "column 15: expected an integer"},
		{`{"event_type":2.0,` + bid + `}`, "expected an integer, not a fraction or an exponent"},
		{`{"event_type":02,` + bid + `}`, "expected an integer without leading zeros"},
		{`{"event_type":2,"bid":{"auction":99999999999999999999}}`, "integer out of range"},
		{`{` + bid + `}`, `the event has no "event_type"`},
		{`{"event_type":1,` + bid + `}`, `event_type 1 (auction) has no "auction" record`},
		{`{"event_type":2,"person":null,"auction":{"id":1,"itemName":"","description":"","initialBid":0,"reserve":0,"dateTime":0,"expires":0,"seller":0,"category":0,"extra":""},` + bid + `}`,
			`event_type 2 (bid) with a "auction" record`},
		{`{"event_type":0}`, `event_type 0 (person) has no "person" record`},
		{`{"event_type":2,"event_type":2,` + bid + `}`, `field "event_type" of the event given twice`},
		{`{"event_type":2,"bid":{"auction":1}}`, `column 35: bid has no field "bidder"`},
		{`{"event_type":2,"bid":{"auction":1,"Auction":1}}`, `unknown field "Auction" in bid`},
		{`{"event_type":2,"extra":1}`, `unknown field "extra" in the event`},
		{`{"event_type":2,` + bid + `} x`, `unexpected 'x' after the event`},
		{`{"event_type":2,` + bid + `}{}`, `unexpected '{' after the event`},
		{`{"event_type":2,"bid":{"channel":"a` + "\x01" + `"}}`, "control character 0x1 in a string"},
		{`{"event_type":2,"bid":{"channel":"\x"}}`, `bad escape \x`},
		{`{"event_type":2,"bid":{"channel":"\u12"}}`, `bad \u escape`},
		{`{"event_type":2,"bid":{"channel":"` + "\xff" + `"}}`, "not valid UTF-8"},
		{`{"event_type":2,"bid":{"channel":"abc}}`, "unexpected end of the line"},
		{`{"event_type":2 "bid":{}}`, `expected ',' or '}' in an event`},
		{`{"event_type" 2}`, `expected ':' after a key`},
		{`{event_type:2}`, `expected a string`},
	}
	for _, tt := range bad {
		_, err := ParseJSON([]byte(tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseJSON(%s): err = %v, want one containing %q", tt.line, err, tt.wantErr)
		}
	}
}

// FuzzParseJSON checks that a line ParseJSON accepts is a line encoding/json
// reads alike, and that AppendJSON writes the event back to a line that
// parses to the same event.
func FuzzParseJSON(f *testing.F) {
	for _, ev := range generate(f, Config{AvgPersonByteSize: 60, AvgAuctionByteSize: 80, AvgBidByteSize: 40}, 0, 8) {
		f.Add(AppendJSON(nil, &ev))
	}
	f.Add([]byte(`{"event_type":0,"person":{"id":-1,"name":"\u00e9\ud83d\ude00","emailAddress":"","creditCard":"","city":"","state":"","dateTime":0,"extra":"\ud800\u0041"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := ParseJSON(line)
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var je jsonEvent
		if err := dec.Decode(&je); err != nil {
			t.Fatalf("ParseJSON accepts what encoding/json rejects (%v): %q", err, line)
		}
		if d := sameAsJSON(ev, je); d != "" {
			t.Fatalf("%s from encoding/json: %q", d, line)
		}
		again, err := ParseJSON(AppendJSON(nil, &ev))
		if err != nil || !eventEqual(again, ev) {
			t.Fatalf("AppendJSON of %q does not parse back: %v", line, err)
		}
	})
}

// TestJSONFileErrors reads files with a malformed or a cut-off line: the
// error names the line, also after a restore.
func TestJSONFileErrors(t *testing.T) {
	dir := t.TempDir()
	lines := make([]string, 0, 10)
	for _, ev := range generate(t, Config{}, 0, 10) {
		lines = append(lines, string(AppendJSON(nil, &ev)))
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	read := func(path string) ([]Event, error) {
		src := JSONFile(path)
		splits, err := src.Splits(t.Context(), 1)
		if err != nil {
			return nil, err
		}
		r := newReader(t, src, 0, 1, splits)
		var e sliceEmitter
		_, err = pollUntil(r, &e, -1)
		return e.events, err
	}

	malformed := write("malformed.jsonl", strings.Join(lines[:2], "\n")+"\n\n"+`{"event_type":2,"bid":{}}`+"\n"+lines[2]+"\n")
	if _, err := read(malformed); err == nil || !strings.Contains(err.Error(), "malformed.jsonl line 4: column 24: bid has no field") {
		t.Errorf("malformed line: err = %v", err)
	}
	truncated := write("truncated.jsonl", strings.Join(lines, "\n")[:len(strings.Join(lines, "\n"))-20])
	events, err := read(truncated)
	if err == nil || !strings.Contains(err.Error(), "truncated.jsonl line 10: column") || !strings.Contains(err.Error(), "is the file truncated?") {
		t.Errorf("truncated file: err = %v", err)
	}
	if len(events) != 9 {
		t.Errorf("truncated file: %d events before the error, want 9", len(events))
	}
	// Blank lines are skipped, CRLF and a last line without '\n' read.
	ok := write("ok.jsonl", "\n"+lines[0]+"\r\n  \n"+lines[1])
	if events, err := read(ok); err != nil || len(events) != 2 {
		t.Errorf("blank lines: %d events, err %v", len(events), err)
	}

	if _, err := JSONFile(filepath.Join(dir, "missing.jsonl")).Splits(t.Context(), 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

// TestJSONFileRestore snapshots a reader after its first Poll: a reader
// restored from the snapshot reads the rest, and counts lines on from there.
func TestJSONFileRestore(t *testing.T) {
	const n = 3000
	events := generate(t, Config{}, 0, n)
	var b []byte
	for i := range events {
		if i == 2499 {
			b = append(b, "{}\n"...) // line 2500
			continue
		}
		b = append(AppendJSON(b, &events[i]), '\n')
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	src := JSONFile(path)
	splits, err := src.Splits(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, src, 0, 1, splits)
	var e sliceEmitter
	if _, err := r.Poll(&e); err != nil {
		t.Fatal(err)
	}
	snap, err := r.Snapshot(1)
	if err != nil {
		t.Fatal(err)
	}
	head := len(e.events)
	if head == 0 || head >= 2499 {
		t.Fatalf("first Poll read %d events", head)
	}
	restored := newReader(t, src, 0, 1, snap)
	var rest sliceEmitter
	_, err = pollUntil(restored, &rest, -1)
	if err == nil || !strings.Contains(err.Error(), `events.jsonl line 2500: column 1: the event has no "event_type"`) {
		t.Errorf("restored reader: err = %v, want one about line 2500", err)
	}
	if d := diffEvents(slices.Concat(e.events, rest.events), events[:2499]); d != "" {
		t.Error(d)
	}
	for i, ev := range e.events {
		if e.ts[i] != ev.DateTime() {
			t.Fatalf("event %d emitted at %d, DateTime %d", i, e.ts[i], ev.DateTime())
		}
	}
}
