package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// seqResult is what the sequential workload measured.
type seqResult struct {
	bytes   int64
	seconds float64
}

// seqJob is one range read from start to end by one worker.
type seqJob struct {
	item     item
	off, len int64
}

// sequential reads every byte of items once: s.Workers workers take
// jobs (whole items, or ranges of s.RangeSize) in listing order and read
// each front to back in s.Chunk reads. A short read is an error: a mount
// that loses bytes must not look fast.
func sequential(ctx context.Context, t Target, items []item, s Settings) (seqResult, error) {
	var jobs []seqJob
	var want int64
	for _, it := range items {
		want += it.size
		step := s.RangeSize
		if step <= 0 {
			step = max(it.size, 1)
		}
		for off := int64(0); off < it.size; off += step {
			jobs = append(jobs, seqJob{it, off, min(step, it.size-off)})
		}
	}
	queue := make(chan seqJob, len(jobs))
	for _, j := range jobs {
		queue <- j
	}
	close(queue)

	var sum tally
	start := time.Now()
	var wg sync.WaitGroup
	for range min(s.Workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, s.Chunk)
			for j := range queue {
				n, err := readJob(ctx, t, j, buf)
				if !sum.add(n, err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	total, first := sum.total, sum.first
	if first != nil {
		return seqResult{}, first
	}
	if total != want {
		return seqResult{}, fmt.Errorf("read %d bytes, want %d", total, want)
	}
	return seqResult{bytes: total, seconds: elapsed}, nil
}

func readJob(ctx context.Context, t Target, j seqJob, buf []byte) (int64, error) {
	r, err := t.open(ctx, j.item)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var done int64
	for done < j.len {
		p := buf[:min(int64(len(buf)), j.len-done)]
		n, err := r.ReadAt(ctx, p, j.off+done)
		done += int64(n)
		if n == len(p) {
			continue
		}
		if err == nil || errors.Is(err, io.EOF) {
			return done, fmt.Errorf("%s: short read at %d: got %d of %d bytes", j.item.key, j.off+done-int64(n), n, len(p))
		}
		return done, fmt.Errorf("%s at %d: %w", j.item.key, j.off+done, err)
	}
	return done, nil
}

// firstByteResult summarises the open-to-first-bytes latencies, in ms.
type firstByteResult struct {
	opens            int
	median, min, max float64
}

// firstByte opens s.Opens items one after another (distinct items in
// listing order, wrapping when there are fewer) and times open plus the read
// of the first s.TTFBSize bytes.
func firstByte(ctx context.Context, t Target, items []item, s Settings) (firstByteResult, error) {
	buf := make([]byte, s.TTFBSize)
	lat := make([]float64, 0, s.Opens)
	for i := range s.Opens {
		it := items[i%len(items)]
		p := buf[:min(s.TTFBSize, it.size)]
		start := time.Now()
		r, err := t.open(ctx, it)
		if err != nil {
			return firstByteResult{}, err
		}
		n, err := r.ReadAt(ctx, p, 0)
		d := time.Since(start)
		r.Close()
		if n != len(p) {
			return firstByteResult{}, fmt.Errorf("%s: read %d of %d bytes: %v", it.key, n, len(p), err)
		}
		lat = append(lat, float64(d.Microseconds())/1e3)
	}
	return firstByteResult{opens: len(lat), median: median(lat), min: slices.Min(lat), max: slices.Max(lat)}, nil
}

// randomResult is what the random workload measured.
type randomResult struct {
	reads   int
	bytes   int64
	seconds float64
}

type randomRead struct {
	item int
	off  int64
}

// random spreads s.RandomReads reads of s.RandomSize over items at
// offsets drawn from s.Seed (aligned to 4 KiB, as loaders' index lookups
// land), read by s.Readers readers. Each reader opens an item once, before
// the clock starts, and keeps it open: the workload times reads, not opens.
func random(ctx context.Context, t Target, items []item, s Settings) (randomResult, error) {
	rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x5eed))
	reads := make([]randomRead, s.RandomReads)
	for i := range reads {
		idx := rng.IntN(len(items))
		span := max(items[idx].size-s.RandomSize, 0) / 4096
		reads[i] = randomRead{item: idx, off: rng.Int64N(span+1) * 4096}
	}
	readers := make([]map[int]itemReader, s.Readers)
	defer func() {
		for _, m := range readers {
			for _, r := range m {
				r.Close()
			}
		}
	}()
	for w := range readers {
		readers[w] = map[int]itemReader{}
		for i := w; i < len(reads); i += s.Readers {
			if _, ok := readers[w][reads[i].item]; ok {
				continue
			}
			r, err := t.open(ctx, items[reads[i].item])
			if err != nil {
				return randomResult{}, err
			}
			readers[w][reads[i].item] = r
		}
	}

	var sum tally
	start := time.Now()
	var wg sync.WaitGroup
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, s.RandomSize)
			for i := w; i < len(reads); i += s.Readers {
				rd := reads[i]
				p := buf[:min(s.RandomSize, items[rd.item].size-rd.off)]
				n, err := readers[w][rd.item].ReadAt(ctx, p, rd.off)
				if n != len(p) {
					err = fmt.Errorf("%s at %d: read %d of %d bytes: %v", items[rd.item].key, rd.off, n, len(p), err)
				} else {
					err = nil
				}
				if !sum.add(int64(n), err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	total, first := sum.total, sum.first
	if first != nil {
		return randomResult{}, first
	}
	return randomResult{reads: len(reads), bytes: total, seconds: elapsed}, nil
}

// tally sums what concurrent benchmark readers read and keeps the first
// failure; add reports whether the reader should go on.
type tally struct {
	mu    sync.Mutex
	total int64
	first error
}

func (t *tally) add(n int64, err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += n
	if err != nil && t.first == nil {
		t.first = err
	}
	return err == nil
}
