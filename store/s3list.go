package store

import (
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// Listing a large prefix is one ListObjectsV2 stream of 1,000 keys a page,
// each page waiting for the one before. With more than one stream allowed,
// List first lists the top of the prefix with a delimiter, which returns
// the objects directly under it and the common prefixes (the directories)
// below. The common prefixes are then cut into up to ListStreams runs of
// neighbours, and each run is listed as one flat, paginated range of keys,
// all runs at once. The requests add up to the serial listing's pages plus
// one per run and the top page(s): bounded however many directories there
// are. A flat prefix (no common prefixes) is still one stream.
//
// A top that holds a single directory and nothing else (train/ under the
// bucket's root) is descended into, a few levels at most, so that its
// directories are the ones split.

// maxListDescent bounds how many single-directory levels List walks down.
const maxListDescent = 3

// listPageKey carries the function told of every LIST request.
type listPageKey struct{}

// withListRequests returns ctx whose List calls tell fn of every request
// they send (Metered counts them).
func withListRequests(ctx context.Context, fn func()) context.Context {
	return context.WithValue(ctx, listPageKey{}, fn)
}

// countListRequest tells the function ctx carries, if any, of one request.
func countListRequest(ctx context.Context) {
	if fn, _ := ctx.Value(listPageKey{}).(func()); fn != nil {
		fn()
	}
}

// keyRun is a range of full keys under level: from the first key at or
// after lo to the last one before hi ("" for no end). Keys directly under
// level are left out: the delimiter listing of level returned them.
type keyRun struct {
	level, lo, hi string
}

func (s *S3) List(ctx context.Context) ([]Object, error) {
	var objs []Object
	var err error
	if s.streams <= 1 {
		objs, err = s.listRun(ctx, keyRun{level: s.prefix}, false)
	} else {
		objs, err = s.listParallel(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := s.fillETags(ctx, objs); err != nil {
		return nil, err
	}
	// ListObjectsV2 returns keys in UTF-8 binary order, which is Go's
	// string order; the runs and the top are merged here.
	if !slices.IsSortedFunc(objs, compareKeys) {
		sortObjects(objs)
	}
	return objs, nil
}

func (s *S3) listParallel(ctx context.Context) ([]Object, error) {
	level := s.prefix
	var objs []Object
	var dirs []string
	for depth := 0; ; depth++ {
		top, sub, err := s.listLevel(ctx, level)
		if err != nil {
			return nil, err
		}
		objs = append(objs, top...)
		dirs = sub
		if len(top) > 0 || len(sub) != 1 || depth == maxListDescent {
			break
		}
		level = sub[0]
	}
	runs := splitRuns(level, dirs, s.streams)
	found := make([][]Object, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	for i, run := range runs {
		g.Go(func() (err error) {
			found[i], err = s.listRun(gctx, run, true)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, f := range found {
		objs = append(objs, f...)
	}
	return objs, nil
}

// splitRuns cuts the sorted common prefixes of level into at most n runs
// of neighbours, about as many prefixes each.
func splitRuns(level string, dirs []string, n int) []keyRun {
	n = min(n, len(dirs))
	runs := make([]keyRun, 0, n)
	for i := range n {
		first, next := i*len(dirs)/n, (i+1)*len(dirs)/n
		run := keyRun{level: level, lo: dirs[first]}
		if next < len(dirs) {
			run.hi = dirs[next]
		}
		runs = append(runs, run)
	}
	return runs
}

// listLevel lists the objects directly under level and the common
// prefixes one level below it.
func (s *S3) listLevel(ctx context.Context, level string) ([]Object, []string, error) {
	var objs []Object
	var dirs []string
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
		Bucket:    aws.String(s.bucket),
		Prefix:    aws.String(level),
		Delimiter: aws.String("/"),
	})
	for pages.HasMorePages() {
		countListRequest(ctx)
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, nil, s.wrap("list "+s.String(), err)
		}
		objs = s.appendObjects(objs, page.Contents, level, false, "")
		for _, p := range page.CommonPrefixes {
			dirs = append(dirs, aws.ToString(p.Prefix))
		}
	}
	return objs, dirs, nil
}

// listRun lists one run of keys as a single paginated stream. below says
// whether the keys directly under the run's level are left out.
func (s *S3) listRun(ctx context.Context, run keyRun, below bool) ([]Object, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(run.level)}
	if run.lo != "" {
		// Start just before lo: every key below lo's directory sorts
		// after lo minus its '/' plus '.', the byte before '/'.
		in.StartAfter = aws.String(strings.TrimSuffix(run.lo, "/") + ".")
	}
	var objs []Object
	pages := s3.NewListObjectsV2Paginator(s.client, in)
	for pages.HasMorePages() {
		countListRequest(ctx)
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, s.wrap("list "+s.String(), err)
		}
		objs = s.appendObjects(objs, page.Contents, run.level, below, run.lo)
		if n := len(page.Contents); run.hi != "" && n > 0 && aws.ToString(page.Contents[n-1].Key) >= run.hi {
			objs = trimFrom(objs, strings.TrimPrefix(run.hi, s.prefix))
			break
		}
	}
	return objs, nil
}

// appendObjects adds a page's objects, keys made relative to the source
// prefix. It leaves out the prefix itself, directory markers, keys before
// lo and, with below, keys directly under level (the delimiter listing of
// level has them). below is its own flag, not a non-empty level: at a
// bucket's root the level is "", and the objects at the root that sort
// after its last directory were listed twice.
func (s *S3) appendObjects(objs []Object, page []types.Object, level string, below bool, lo string) []Object {
	for _, o := range page {
		full := aws.ToString(o.Key)
		if full < lo {
			continue
		}
		if below && !strings.Contains(full[len(level):], "/") {
			continue
		}
		key := strings.TrimPrefix(full, s.prefix)
		if key == "" || strings.HasSuffix(key, "/") {
			continue // the prefix itself or a directory marker
		}
		objs = append(objs, Object{
			Key:     key,
			Size:    aws.ToInt64(o.Size),
			ETag:    aws.ToString(o.ETag),
			ModTime: aws.ToTime(o.LastModified),
		})
	}
	return objs
}

// trimFrom drops the objects at and after key (they are sorted).
func trimFrom(objs []Object, key string) []Object {
	i, _ := slices.BinarySearchFunc(objs, key, func(o Object, k string) int { return strings.Compare(o.Key, k) })
	return objs[:i]
}
