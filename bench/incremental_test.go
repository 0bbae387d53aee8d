package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/weirstream/weir/codec"
	"github.com/weirstream/weir/internal/keygroup"
	"github.com/weirstream/weir/internal/statebackend/pebble"
	"github.com/weirstream/weir/internal/storage"
)

var incrementalKeys = flag.Int("pebble-inc.keys", 200_000, "keys (100-byte values) of BenchmarkPebbleCheckpointFullVsIncremental")

// BenchmarkPebbleCheckpointFullVsIncremental compares, on the pebble backend
// alone (no job; BenchmarkCheckpointFullVsIncremental runs a job), a
// full canonical checkpoint with an incremental one, each taken after 1% of
// the keys were updated, written to a file store: bytes written per
// checkpoint (uploaded-B/op) and time (ns/op: the synchronous and
// asynchronous parts together). The incremental side uploads the data
// files its previous checkpoint did not hold and the small exclusive files,
// as weir's incremental checkpoints do (internal/statebackend/incremental).
//
//	go test ./bench -run '^$' -bench PebbleCheckpointFullVsIncremental -benchtime 5x
func BenchmarkPebbleCheckpointFullVsIncremental(b *testing.B) {
	for _, mode := range []string{"full", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			const maxPar = 128
			dir := b.TempDir()
			be, err := pebble.New[string](keygroup.Range{Start: 0, End: maxPar}, codec.String(), pebble.Options{Dir: filepath.Join(dir, "db")})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			v, err := pebble.NewValueState(be, "v", codec.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			val := make([]byte, 100)
			var kb []byte
			put := func(i int) {
				k := fmt.Sprintf("key-%07d", i)
				kb = codec.String().Append(kb[:0], k)
				be.SetCurrentKey(k, keygroup.Of(kb, maxPar))
				for j := range val {
					val[j] = byte(rng.Uint32())
				}
				v.Update(val)
			}
			for i := range *incrementalKeys {
				put(i)
			}
			st, err := storage.Open(filepath.Join(dir, "store"))
			if err != nil {
				b.Fatal(err)
			}
			cs := storage.CheckpointStorage{Store: st, JobID: "job"}
			ctx := context.Background()
			var prev []string // data files uploaded by the previous checkpoint
			checkpoint := func(id int64) int64 {
				if mode == "full" {
					snap, err := be.Snapshot(id)
					if err != nil {
						b.Fatal(err)
					}
					defer snap.Release()
					size, _, err := cs.WriteStateFile(ctx, cs.CheckpointDir(id), "state", func(w io.Writer) error {
						_, err := snap.WriteState(w)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					return size
				}
				local := filepath.Join(dir, fmt.Sprint("chk-", id))
				files, err := be.SnapshotIncremental(id, local)
				if err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(local)
				entries, err := os.ReadDir(local)
				if err != nil {
					b.Fatal(err)
				}
				var total int64
				for _, e := range entries {
					name := e.Name()
					if slices.Contains(files, name) && slices.Contains(prev, name) {
						continue // referred to, not uploaded
					}
					target := cs.CheckpointDir(id)
					if slices.Contains(files, name) {
						target = cs.SharedDir()
					}
					size, _, err := cs.UploadStateFile(ctx, target, fmt.Sprint(id, "-", name), filepath.Join(local, name))
					if err != nil {
						b.Fatal(err)
					}
					total += size
				}
				prev = files
				return total
			}
			checkpoint(1) // the first checkpoint uploads everything either way
			var uploaded int64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				for range *incrementalKeys / 100 {
					put(rng.IntN(*incrementalKeys))
				}
				b.StartTimer()
				uploaded += checkpoint(int64(i + 2))
			}
			b.ReportMetric(float64(uploaded)/float64(b.N), "uploaded-B/op")
		})
	}
}
