package store

import (
	"fmt"
	"strings"
)

// Source is a parsed SOURCE argument: either an S3 bucket and prefix or a
// local directory.
type Source struct {
	Bucket string // set for s3:// sources
	Prefix string // "" or ends with "/"
	Dir    string // set for local sources
}

// IsS3 reports whether the source names a bucket.
func (s Source) IsS3() bool { return s.Bucket != "" }

func (s Source) String() string {
	if s.IsS3() {
		return "s3://" + s.Bucket + "/" + s.Prefix
	}
	return s.Dir
}

// ParseSource accepts "s3://bucket", "s3://bucket/prefix" and local paths.
// Any other URL scheme is an error.
func ParseSource(arg string) (Source, error) {
	if arg == "" {
		return Source{}, fmt.Errorf("source is empty: want s3://bucket[/prefix] or a directory")
	}
	if rest, ok := strings.CutPrefix(arg, "s3://"); ok {
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return Source{}, fmt.Errorf("source %q has no bucket: want s3://bucket[/prefix]", arg)
		}
		if !validBucket(bucket) {
			return Source{}, fmt.Errorf("source %q: %q is not a valid bucket name", arg, bucket)
		}
		prefix = strings.TrimLeft(prefix, "/")
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		return Source{Bucket: bucket, Prefix: prefix}, nil
	}
	if i := strings.Index(arg, "://"); i > 0 {
		return Source{}, fmt.Errorf("source %q: unsupported scheme %q: want s3://bucket[/prefix] or a directory", arg, arg[:i])
	}
	return Source{Dir: arg}, nil
}

// validBucket applies the S3 bucket naming rules loosely (3-63 characters of
// lower-case letters, digits, dots and hyphens) so that a typo fails at
// parse time with a clear message rather than as a signing error.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
