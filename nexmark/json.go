package nexmark

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendJSON appends ev as one line of JSON, without the newline, with the
// field names of the Flink DDL: event_type, and the one of person, auction
// and bid that the event holds; dateTime and expires are milliseconds since
// the Unix epoch. For example:
//
//	{"event_type":2,"bid":{"auction":1000,"bidder":1001,"price":32530001,"channel":"Google","url":"https://www.nexmark.com/…","dateTime":1436918400000,"extra":"…"}}
//
// Invalid UTF-8 in a string is written as U+FFFD, as encoding/json does.
func AppendJSON(dst []byte, ev *Event) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = strconv.AppendInt(dst, int64(ev.Type), 10)
	switch ev.Type {
	case PersonEvent:
		dst = append(dst, `,"person":`...)
		p := ev.Person
		if p == nil {
			dst = append(dst, "null"...)
			break
		}
		dst = appendIntField(dst, `{"id":`, p.ID)
		dst = appendStringField(dst, `,"name":`, p.Name)
		dst = appendStringField(dst, `,"emailAddress":`, p.EmailAddress)
		dst = appendStringField(dst, `,"creditCard":`, p.CreditCard)
		dst = appendStringField(dst, `,"city":`, p.City)
		dst = appendStringField(dst, `,"state":`, p.State)
		dst = appendIntField(dst, `,"dateTime":`, p.DateTime)
		dst = appendStringField(dst, `,"extra":`, p.Extra)
		dst = append(dst, '}')
	case AuctionEvent:
		dst = append(dst, `,"auction":`...)
		a := ev.Auction
		if a == nil {
			dst = append(dst, "null"...)
			break
		}
		dst = appendIntField(dst, `{"id":`, a.ID)
		dst = appendStringField(dst, `,"itemName":`, a.ItemName)
		dst = appendStringField(dst, `,"description":`, a.Description)
		dst = appendIntField(dst, `,"initialBid":`, a.InitialBid)
		dst = appendIntField(dst, `,"reserve":`, a.Reserve)
		dst = appendIntField(dst, `,"dateTime":`, a.DateTime)
		dst = appendIntField(dst, `,"expires":`, a.Expires)
		dst = appendIntField(dst, `,"seller":`, a.Seller)
		dst = appendIntField(dst, `,"category":`, a.Category)
		dst = appendStringField(dst, `,"extra":`, a.Extra)
		dst = append(dst, '}')
	case BidEvent:
		b := &ev.Bid
		dst = appendIntField(dst, `,"bid":{"auction":`, b.Auction)
		dst = appendIntField(dst, `,"bidder":`, b.Bidder)
		dst = appendIntField(dst, `,"price":`, b.Price)
		dst = appendStringField(dst, `,"channel":`, b.Channel)
		dst = appendStringField(dst, `,"url":`, b.URL)
		dst = appendIntField(dst, `,"dateTime":`, b.DateTime)
		dst = appendStringField(dst, `,"extra":`, b.Extra)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

func appendIntField(dst []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(dst, key...), v, 10)
}

func appendStringField(dst []byte, key, s string) []byte {
	return appendJSONString(append(dst, key...), s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// errTruncated marks JSON that ends before its value does.
var errTruncated = errors.New("unexpected end of the line (is the file truncated?)")

// ParseJSON parses one line written by AppendJSON. It is strict: the line
// must be one JSON object with an event_type of 0, 1 or 2 and the matching
// record (the others may be absent or null), the record must have every
// field of its kind, with integers for the numbers and times, and no field
// may be unknown or repeated.
func ParseJSON(line []byte) (Event, error) {
	var p jsonParser
	return p.parse(line)
}

// jsonParser parses lines of events. It may intern the strings that repeat
// (names, cities, channels, URLs), so that reading a file does not allocate
// them again and again.
type jsonParser struct {
	b       []byte
	i       int
	scratch []byte
	intern  map[string]string
}

// maxInterned bounds the interned strings of a parser.
const maxInterned = 1 << 16

type jsonError struct {
	col int
	err error
}

func (e *jsonError) Error() string { return fmt.Sprintf("column %d: %v", e.col, e.err) }
func (e *jsonError) Unwrap() error { return e.err }

func (p *jsonParser) fail(format string, args ...any) error {
	if p.i >= len(p.b) {
		return &jsonError{col: p.i + 1, err: errTruncated}
	}
	return &jsonError{col: p.i + 1, err: fmt.Errorf(format, args...)}
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips white space and then c, if c comes next.
func (p *jsonParser) consume(c byte) bool {
	p.skipSpace()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// null consumes a null literal if one comes next.
func (p *jsonParser) null() bool {
	p.skipSpace()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// object parses an object, calling field for each key with the parser at
// its value.
func (p *jsonParser) object(what string, field func(key []byte) error) error {
	if !p.consume('{') {
		return p.fail("expected %s object", what)
	}
	if p.consume('}') {
		return nil
	}
	for {
		p.skipSpace()
		key, err := p.rawString()
		if err != nil {
			return err
		}
		if !p.consume(':') {
			return p.fail("expected ':' after a key")
		}
		if err := field(key); err != nil {
			return err
		}
		if p.consume(',') {
			continue
		}
		if p.consume('}') {
			return nil
		}
		return p.fail("expected ',' or '}' in %s", what)
	}
}

// rawString parses a string and returns its bytes, which are valid until
// the next call.
func (p *jsonParser) rawString() ([]byte, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, p.fail("expected a string")
	}
	p.i++
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				p.i = start
				return nil, p.fail("string is not valid UTF-8")
			}
			return s, nil
		case c == '\\':
			return p.escapedString(start)
		case c < 0x20:
			return nil, p.fail("control character %#x in a string", c)
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return nil, p.fail("unterminated string")
}

// escapedString finishes a string that starts at start and has an escape
// at p.i, decoding it into the scratch buffer.
func (p *jsonParser) escapedString(start int) ([]byte, error) {
	buf := append(p.scratch[:0], p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			p.scratch = buf
			if !utf8.Valid(buf) {
				return nil, p.fail("string is not valid UTF-8")
			}
			return buf, nil
		case c < 0x20:
			return nil, p.fail("control character %#x in a string", c)
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			p.i = len(p.b)
			return nil, p.fail("")
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, p.fail("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					if r2, ok = p.hex4(); !ok {
						p.i = save
						r2 = -1
					}
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
				} else {
					if r2 >= 0 {
						p.i -= 6 // not a pair: the second escape stands alone
					}
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.i -= 2
			return nil, p.fail("bad escape \\%c", e)
		}
	}
	return nil, p.fail("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// str parses a string value.
func (p *jsonParser) str(intern bool) (string, error) {
	p.skipSpace()
	b, err := p.rawString()
	if err != nil {
		return "", err
	}
	if !intern {
		return string(b), nil
	}
	if s, ok := p.intern[string(b)]; ok {
		return s, nil
	}
	s := string(b)
	if p.intern == nil {
		p.intern = make(map[string]string)
	}
	if len(p.intern) < maxInterned {
		p.intern[s] = s
	}
	return s, nil
}

// int parses an integer value: a JSON number without fraction or exponent.
func (p *jsonParser) int() (int64, error) {
	p.skipSpace()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == digits:
		if p.i >= len(p.b) {
			return 0, p.fail("")
		}
		p.i = start
		return 0, p.fail("expected an integer")
	case p.b[digits] == '0' && p.i-digits > 1:
		p.i = start
		return 0, p.fail("expected an integer without leading zeros")
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		p.i = start
		return 0, p.fail("expected an integer, not a fraction or an exponent")
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		p.i = start
		return 0, p.fail("integer out of range [%d, %d]", int64(math.MinInt64), int64(math.MaxInt64))
	}
	return v, nil
}

// fields tracks which fields of a record were seen.
type fields struct {
	record string
	names  []string
	seen   uint32
}

// mark records field i, failing on a repeat.
func (f *fields) mark(p *jsonParser, i int) error {
	if f.seen&(1<<i) != 0 {
		return p.fail("field %q of %s given twice", f.names[i], f.record)
	}
	f.seen |= 1 << i
	return nil
}

// missing reports the first field not seen, at the record's closing brace
// (which the parser has just passed).
func (f *fields) missing(p *jsonParser) error {
	for i, name := range f.names {
		if f.seen&(1<<i) == 0 {
			return &jsonError{col: p.i, err: fmt.Errorf("%s has no field %q", f.record, name)}
		}
	}
	return nil
}

func (p *jsonParser) unknown(key []byte, record string) error {
	return p.fail("unknown field %q in %s", key, record)
}

var personFields = []string{"id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"}

func (p *jsonParser) person() (*Person, error) {
	v := &Person{}
	f := fields{record: "person", names: personFields}
	err := p.object("a person", func(key []byte) (err error) {
		i := -1
		switch string(key) {
		case "id":
			i = 0
			v.ID, err = p.int()
		case "name":
			i = 1
			v.Name, err = p.str(true)
		case "emailAddress":
			i = 2
			v.EmailAddress, err = p.str(false)
		case "creditCard":
			i = 3
			v.CreditCard, err = p.str(false)
		case "city":
			i = 4
			v.City, err = p.str(true)
		case "state":
			i = 5
			v.State, err = p.str(true)
		case "dateTime":
			i = 6
			v.DateTime, err = p.int()
		case "extra":
			i = 7
			v.Extra, err = p.str(false)
		default:
			return p.unknown(key, "person")
		}
		if err != nil {
			return err
		}
		return f.mark(p, i)
	})
	if err != nil {
		return nil, err
	}
	return v, f.missing(p)
}

var auctionFields = []string{"id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category", "extra"}

func (p *jsonParser) auction() (*Auction, error) {
	v := &Auction{}
	f := fields{record: "auction", names: auctionFields}
	err := p.object("an auction", func(key []byte) (err error) {
		i := -1
		switch string(key) {
		case "id":
			i = 0
			v.ID, err = p.int()
		case "itemName":
			i = 1
			v.ItemName, err = p.str(false)
		case "description":
			i = 2
			v.Description, err = p.str(false)
		case "initialBid":
			i = 3
			v.InitialBid, err = p.int()
		case "reserve":
			i = 4
			v.Reserve, err = p.int()
		case "dateTime":
			i = 5
			v.DateTime, err = p.int()
		case "expires":
			i = 6
			v.Expires, err = p.int()
		case "seller":
			i = 7
			v.Seller, err = p.int()
		case "category":
			i = 8
			v.Category, err = p.int()
		case "extra":
			i = 9
			v.Extra, err = p.str(false)
		default:
			return p.unknown(key, "auction")
		}
		if err != nil {
			return err
		}
		return f.mark(p, i)
	})
	if err != nil {
		return nil, err
	}
	return v, f.missing(p)
}

var bidFields = []string{"auction", "bidder", "price", "channel", "url", "dateTime", "extra"}

func (p *jsonParser) bid(v *Bid) error {
	f := fields{record: "bid", names: bidFields}
	err := p.object("a bid", func(key []byte) (err error) {
		i := -1
		switch string(key) {
		case "auction":
			i = 0
			v.Auction, err = p.int()
		case "bidder":
			i = 1
			v.Bidder, err = p.int()
		case "price":
			i = 2
			v.Price, err = p.int()
		case "channel":
			i = 3
			v.Channel, err = p.str(true)
		case "url":
			i = 4
			v.URL, err = p.str(true)
		case "dateTime":
			i = 5
			v.DateTime, err = p.int()
		case "extra":
			i = 6
			v.Extra, err = p.str(false)
		default:
			return p.unknown(key, "bid")
		}
		if err != nil {
			return err
		}
		return f.mark(p, i)
	})
	if err != nil {
		return err
	}
	return f.missing(p)
}

var eventFields = []string{"event_type", "person", "auction", "bid"}

func (p *jsonParser) parse(line []byte) (Event, error) {
	p.b, p.i = line, 0
	var ev Event
	typ := int64(-1)
	hasBid := false
	f := fields{record: "the event", names: eventFields}
	err := p.object("an event", func(key []byte) (err error) {
		i := -1
		switch string(key) {
		case "event_type":
			i = 0
			start := p.i
			if typ, err = p.int(); err == nil && (typ < 0 || typ > 2) {
				p.i = start
				p.skipSpace()
				return p.fail("event_type must be 0 (person), 1 (auction) or 2 (bid), got %d", typ)
			}
		case "person":
			i = 1
			if !p.null() {
				ev.Person, err = p.person()
			}
		case "auction":
			i = 2
			if !p.null() {
				ev.Auction, err = p.auction()
			}
		case "bid":
			i = 3
			if !p.null() {
				hasBid = true
				err = p.bid(&ev.Bid)
			}
		default:
			return p.unknown(key, "the event")
		}
		if err != nil {
			return err
		}
		return f.mark(p, i)
	})
	if err != nil {
		return Event{}, err
	}
	if p.skipSpace(); p.i < len(p.b) {
		return Event{}, p.fail("unexpected %q after the event", p.b[p.i])
	}
	if typ < 0 {
		return Event{}, &jsonError{col: 1, err: errors.New(`the event has no "event_type"`)}
	}
	ev.Type = EventType(typ)
	has := [3]bool{ev.Person != nil, ev.Auction != nil, hasBid}
	if !has[typ] {
		return Event{}, &jsonError{col: 1, err: fmt.Errorf("event_type %d (%v) has no %q record", typ, ev.Type, ev.Type.String())}
	}
	for t, ok := range has {
		if ok && t != int(typ) {
			return Event{}, &jsonError{col: 1, err: fmt.Errorf("event_type %d (%v) with a %q record", typ, ev.Type, EventType(t).String())}
		}
	}
	return ev, nil
}
