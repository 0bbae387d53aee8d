// Package wordcount is the streaming word count: for every occurrence of a
// word it emits the word's running count, as Flink's streaming WordCount does.
//
// Words are the maximal runs of Unicode letters and digits, lower-cased.
// Output records are lines "word,count".
package wordcount

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/weirstream/weir"
	"github.com/weirstream/weir/state"
)

// Tokenize calls emit for every word of line, lower-cased.
func Tokenize(line string, emit func(string)) {
	start := -1
	for i, r := range line {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			emit(strings.ToLower(line[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		emit(strings.ToLower(line[start:]))
	}
}

// Counter keeps a running count per word in keyed state.
type Counter struct {
	count state.Value[int64]
}

// Open creates the keyed state.
func (c *Counter) Open(ctx *weir.KeyedContext[string]) (err error) {
	c.count, err = weir.Value[int64](ctx, "count")
	return err
}

// ProcessElement counts one occurrence of the current word.
func (c *Counter) ProcessElement(ctx *weir.KeyedContext[string], word string, out weir.Collector[string]) error {
	n, _ := c.count.Value()
	n++
	c.count.Update(n)
	out.Collect(word + "," + strconv.FormatInt(n, 10))
	return nil
}

// Build adds the word count to lines and returns its result stream.
func Build(lines *weir.Stream[string]) *weir.Stream[string] {
	words := lines.FlatMap("tokenize", func(line string, out weir.Collector[string]) {
		Tokenize(line, out.Collect)
	})
	return words.KeyBy(func(w string) string { return w }).Process("count", &Counter{})
}
