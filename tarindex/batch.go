package tarindex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/shardfs/shardfs/atomicfile"
	"github.com/shardfs/shardfs/store"
)

// Batch writes the indexes of many shards as one stream of JSON lines:
// each line of a shard's index with "shard":KEY added, shards in the
// order given, a shard that cannot be indexed left out and reported.
type Batch struct {
	Index       *Index
	Find        Finder // the objects beside the shards (their sidecars)
	Concurrency int    // shards built at once

	// Built, when set, is called as each shard's build ends, on the
	// goroutine that built it (a progress bar counts with it).
	Built func(store.Object)
	// Failed, when set, is called for each shard that could not be
	// indexed, in shard order, on the goroutine of Write.
	Failed func(store.Object, error)
}

// Write builds the index of each shard, Concurrency at a time, and
// writes them to out in the order of shards. It returns how many shards
// failed. On a cancelled ctx it returns at once, with what was written so
// far, and the builds in flight end on their own.
func (b Batch) Write(ctx context.Context, out io.Writer, shards []store.Object) (failed int, err error) {
	n := max(b.Concurrency, 1)
	type built struct {
		lines []byte
		err   error
	}
	results := make([]chan built, len(shards))
	for i := range results {
		results[i] = make(chan built, 1)
	}
	// The builds run n at a time on goroutines owned here, started in
	// shard order by one dispatcher that takes a slot of ahead first: at
	// most 4n shards are built and not yet written, so a slow first shard
	// does not pile up the indexes of all the others. They are waited for
	// once every result is written.
	ahead := make(chan struct{}, 4*n)
	builders := make(chan struct{})
	go func() {
		defer close(builders)
		var g errgroup.Group
		g.SetLimit(n)
		defer g.Wait()
		for i := range shards {
			select {
			case ahead <- struct{}{}:
			case <-ctx.Done():
				return
			}
			g.Go(func() error {
				lines, err := b.Index.JSONLines(ctx, shards[i], b.Find)
				if err == nil {
					lines, err = withShard(shards[i].Key, lines)
				}
				if b.Built != nil {
					b.Built(shards[i])
				}
				results[i] <- built{lines, err}
				return nil
			})
		}
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	for i, o := range shards {
		var r built
		select {
		case r = <-results[i]:
		case <-ctx.Done():
			return failed, nil
		}
		<-ahead
		if r.err != nil {
			failed++
			if b.Failed != nil {
				b.Failed(o, r.err)
			}
			continue
		}
		if _, err := w.Write(r.lines); err != nil {
			return failed, err
		}
	}
	<-builders
	return failed, w.Flush()
}

// WriteFile is Write into the file path, replaced whole (durably) only
// when every shard was indexed and ctx was not cancelled: otherwise path
// is left as it was. A path whose directory cannot hold it fails before
// any shard is built.
func (b Batch) WriteFile(ctx context.Context, path string, shards []store.Object) (failed int, err error) {
	f, err := atomicfile.Create(path)
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		return 0, fmt.Errorf("cannot write in %s: %w", filepath.Dir(path), pe.Err)
	}
	if err != nil {
		return 0, err
	}
	defer f.Discard() // a no-op once committed
	failed, err = b.Write(ctx, f, shards)
	if err != nil || failed > 0 || ctx.Err() != nil {
		return failed, err
	}
	// Durable: the command that wrote it has said so when it returns.
	return 0, f.Commit(atomicfile.Durable)
}

// withShard adds "shard":key in front of each line of a rendered index.
func withShard(key string, lines []byte) ([]byte, error) {
	k, err := json.Marshal(key)
	if err != nil {
		return nil, err
	}
	prefix := append(append([]byte(`{"shard":`), k...), ',')
	var out bytes.Buffer
	for len(lines) > 0 {
		line, rest, _ := bytes.Cut(lines, []byte{'\n'})
		if len(line) < 2 || line[0] != '{' {
			return nil, errors.New("malformed index line")
		}
		out.Write(prefix)
		out.Write(line[1:])
		out.WriteByte('\n')
		lines = rest
	}
	return out.Bytes(), nil
}

// FinderOf finds objects among objs by key.
func FinderOf(objs []store.Object) Finder {
	byKey := make(map[string]store.Object, len(objs))
	for _, o := range objs {
		byKey[o.Key] = o
	}
	return func(key string) (store.Object, bool) { o, ok := byKey[key]; return o, ok }
}
