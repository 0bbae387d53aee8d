package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Setting is one key of a file with its checked value.
type Setting struct {
	Key *Key
	// Value is the value as the key's flag takes it (a duration in Go's
	// form, an Enum's value for an alias, the host or port alone for Host
	// and Port keys).
	Value string
	// Line is the key's line in the file.
	Line int
}

// File is a loaded configuration file.
type File struct {
	// Path is the file's path, as given to Load.
	Path string
	// Settings are the file's keys in the order they appear.
	Settings []Setting
}

// Load reads and checks the file at path: every key must be known and
// every value valid for its key.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("--config %s: no such file", path)
		}
		return nil, fmt.Errorf("--config: %w", err)
	}
	return Parse(path, data)
}

// Parse checks data, the contents of the file at path (for messages).
func Parse(path string, data []byte) (*File, error) {
	f := &File{Path: path}
	if len(bytes.TrimSpace(data)) == 0 {
		return f, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: not valid YAML: %s", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return f, nil // only comments
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: the file must be a mapping of keys to values, such as \"parallelism.default: 2\"", path, root.Line)
	}
	seen := map[string]int{}
	var walk func(prefix string, m *yaml.Node) error
	walk = func(prefix string, m *yaml.Node) error {
		for i := 0; i+1 < len(m.Content); i += 2 {
			kn, vn := m.Content[i], m.Content[i+1]
			name := kn.Value
			if prefix != "" {
				name = prefix + "." + name
			}
			if vn.Kind == yaml.MappingNode {
				if err := walk(name, vn); err != nil {
					return err
				}
				continue
			}
			k, ok := lookup(name)
			if !ok {
				return fmt.Errorf("%s:%d: unknown key %q: did you mean %q?", path, kn.Line, name, nearest(name))
			}
			if line, dup := seen[name]; dup {
				return fmt.Errorf("%s:%d: %s is set twice (first on line %d): keep one", path, kn.Line, name, line)
			}
			seen[name] = kn.Line
			if vn.Kind != yaml.ScalarNode || vn.Tag == "!!null" {
				return fmt.Errorf("%s:%d: %s has no single value: use %s", path, kn.Line, name, k.Accepts)
			}
			v, err := k.check(vn.Value)
			if err != nil {
				return fmt.Errorf("%s:%d: %s is %q: use %s", path, vn.Line, name, vn.Value, k.Accepts)
			}
			f.Settings = append(f.Settings, Setting{Key: k, Value: v, Line: kn.Line})
		}
		return nil
	}
	if err := walk("", root); err != nil {
		return nil, err
	}
	return f, nil
}

// check parses raw as a value of k and returns it as k's flag takes it.
func (k *Key) check(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	switch k.Kind {
	case Duration:
		if k.MinusOne != "" && s == "-1" {
			return k.MinusOne, nil
		}
		d, err := ParseDuration(s)
		if err != nil || !k.inRange(int64(d)) {
			return "", errRange
		}
		return d.String(), nil
	case Int, Port:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || !k.inRange(n) {
			return "", errRange
		}
		return strconv.FormatInt(n, 10), nil
	case Bool:
		switch strings.ToLower(s) {
		case "true":
			return "true", nil
		case "false":
			return "false", nil
		}
		return "", errRange
	case Enum:
		n := strings.ReplaceAll(strings.ToLower(s), "_", "-")
		if slices.Contains(k.Values, n) {
			return n, nil
		}
		if v, ok := k.Aliases[n]; ok {
			return v, nil
		}
		return "", errRange
	case Host:
		if s == "" || strings.ContainsAny(s, " /") {
			return "", errRange
		}
		return s, nil
	default: // String
		if s == "" {
			return "", errRange
		}
		return s, nil
	}
}

var errRange = errors.New("out of range")

func (k *Key) inRange(n int64) bool {
	if n == 0 && k.ZeroOK {
		return true
	}
	return n >= k.Min && (k.Max == 0 || n <= k.Max)
}

// flinkDuration is Flink's duration syntax: a number and an optional unit.
var flinkDuration = regexp.MustCompile(`^(\d+)\s*([a-zµ]*)$`)

// flinkUnits are Flink's time units (TimeUtils).
var flinkUnits = map[string]time.Duration{
	"": time.Millisecond, "ms": time.Millisecond, "milli": time.Millisecond, "millis": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"us": time.Microsecond, "µs": time.Microsecond, "micro": time.Microsecond, "micros": time.Microsecond,
	"microsecond": time.Microsecond, "microseconds": time.Microsecond,
	"ns": time.Nanosecond, "nano": time.Nanosecond, "nanos": time.Nanosecond,
	"nanosecond": time.Nanosecond, "nanoseconds": time.Nanosecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// ParseDuration parses a Go duration (1m30s) or a Flink one ("10 s",
// "500 ms", "2 min", "3 d"; a bare number is milliseconds). Negative
// durations are not accepted.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	m := flinkDuration.FindStringSubmatch(strings.ToLower(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	unit, ok := flinkUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("%q: unknown time unit %q", s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > int64(1<<63-1)/int64(unit) {
		return 0, fmt.Errorf("%q is too long a duration", s)
	}
	return time.Duration(n) * unit, nil
}

// Apply sets the flags of fs, those of the command named command (for
// messages, such as "weir run wordcount"), that the file sets and the
// command line did not (flags override the file). A key whose flag fs does
// not have is an error: the command has no such setting.
func (f *File) Apply(fs *pflag.FlagSet, command string) error { return f.apply(fs, command, false) }

// ApplyShared is Apply for the cluster's role commands (weir jobmanager,
// weir taskmanager), which share one file: a Cluster key the command has
// no flag for belongs to the other role and is skipped.
func (f *File) ApplyShared(fs *pflag.FlagSet, command string) error {
	return f.apply(fs, command, true)
}

func (f *File) apply(fs *pflag.FlagSet, command string, shared bool) error {
	// Host and Port keys share one host:port flag: gather its parts first.
	type hostPort struct {
		host, port string
		line       int
		names      []string
	}
	joined := map[string]*hostPort{}
	var order []string
	for _, s := range f.Settings {
		flag := s.Key.Flag
		fl := fs.Lookup(flag)
		if fl == nil && s.Key.AltFlag != "" {
			flag = s.Key.AltFlag
			fl = fs.Lookup(flag)
		}
		if fl == nil {
			if shared && s.Key.Cluster {
				continue
			}
			return fmt.Errorf("%s:%d: %s does not apply to %s: it has no --%s", f.Path, s.Line, s.Key.Name, command, s.Key.Flag)
		}
		if fl.Changed {
			continue
		}
		switch s.Key.Kind {
		case Host, Port:
			hp := joined[flag]
			if hp == nil {
				hp = &hostPort{line: s.Line}
				joined[flag] = hp
				order = append(order, flag)
			}
			hp.names = append(hp.names, s.Key.Name)
			if s.Key.Kind == Host {
				hp.host = s.Value
			} else {
				hp.port = s.Value
			}
			continue
		}
		if err := fs.Set(flag, s.Value); err != nil {
			return fmt.Errorf("%s:%d: %s is %q: %v", f.Path, s.Line, s.Key.Name, s.Value, err)
		}
	}
	for _, name := range order {
		hp := joined[name]
		host, port, err := net.SplitHostPort(fs.Lookup(name).DefValue)
		if err != nil {
			host, port = "127.0.0.1", "8081"
		}
		if hp.host != "" {
			host = hp.host
		}
		if hp.port != "" {
			port = hp.port
		}
		if err := fs.Set(name, net.JoinHostPort(host, port)); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", f.Path, hp.line, strings.Join(hp.names, " and "), err)
		}
	}
	return nil
}

// nearest returns the known key closest to name.
func nearest(name string) string {
	best, bestD := "", -1
	for _, k := range Keys {
		d := distance(name, k.Name)
		// A key named by its last part only ("interval") is near the
		// full key that ends with it.
		if strings.HasSuffix(k.Name, "."+name) {
			d = 0
		}
		// Nor is a key cut short ("...max-concurrent").
		if strings.HasPrefix(k.Name, name) && strings.Contains(name, ".") {
			d = min(d, 1)
		}
		if bestD < 0 || d < bestD {
			best, bestD = k.Name, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
