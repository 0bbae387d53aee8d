package nexmark

import "fmt"

// EventType tells which of an Event's records is set. Its values are those of
// the event_type column of the Flink DDL.
type EventType int8

const (
	// PersonEvent marks an Event whose Person is set.
	PersonEvent EventType = 0
	// AuctionEvent marks an Event whose Auction is set.
	AuctionEvent EventType = 1
	// BidEvent marks an Event whose Bid is set.
	BidEvent EventType = 2
)

func (t EventType) String() string {
	switch t {
	case PersonEvent:
		return "person"
	case AuctionEvent:
		return "auction"
	case BidEvent:
		return "bid"
	}
	return fmt.Sprintf("EventType(%d)", int8(t))
}

// Person is a new user of the auction site. Times are milliseconds since
// the Unix epoch (TIMESTAMP(3) in the Flink DDL).
type Person struct {
	ID           int64
	Name         string
	EmailAddress string
	CreditCard   string
	City         string
	State        string
	DateTime     int64
	Extra        string
}

// Auction is an item put up for auction by Seller (a Person ID) in
// Category, open from DateTime to Expires.
type Auction struct {
	ID          int64
	ItemName    string
	Description string
	InitialBid  int64
	Reserve     int64
	DateTime    int64
	Expires     int64
	Seller      int64
	Category    int64
	Extra       string
}

// Bid is a bid of Bidder (a Person ID) on Auction (an Auction ID). Channel
// and URL are the Flink project's additions (for q16, q21 and q22).
type Bid struct {
	Auction  int64
	Bidder   int64
	Price    int64
	Channel  string
	URL      string
	DateTime int64
	Extra    string
}

// Event is one element of the Nexmark stream: a Person, an Auction or a Bid,
// as told by Type. Events are values; treat the records they point to as
// immutable, since copies of an Event share them.
//
// Bids are 92% of the stream, so a Bid is held by value: generating, copying
// or batching a bid event allocates nothing beyond its strings. Person and
// Auction are pointers so that an Event stays small (about 100 bytes); they
// are nil unless Type says otherwise, and Bid is the zero Bid unless Type is
// BidEvent.
type Event struct {
	Type    EventType
	Person  *Person
	Auction *Auction
	Bid     Bid
}

// DateTime is the event time of the record the event holds, in milliseconds
// since the Unix epoch: the dateTime column of the Flink DDL, on which its
// watermark is defined.
func (e Event) DateTime() int64 {
	switch e.Type {
	case PersonEvent:
		if e.Person != nil {
			return e.Person.DateTime
		}
	case AuctionEvent:
		if e.Auction != nil {
			return e.Auction.DateTime
		}
	case BidEvent:
		return e.Bid.DateTime
	}
	return 0
}

// PersonOf returns an Event holding p.
func PersonOf(p *Person) Event { return Event{Type: PersonEvent, Person: p} }

// AuctionOf returns an Event holding a.
func AuctionOf(a *Auction) Event { return Event{Type: AuctionEvent, Auction: a} }

// BidOf returns an Event holding b.
func BidOf(b Bid) Event { return Event{Type: BidEvent, Bid: b} }
