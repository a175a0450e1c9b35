package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// S3Options configure an S3 backend. Credentials come from the standard AWS
// chain (environment, shared config and profiles, IMDS) and are never logged.
type S3Options struct {
	Endpoint       string        // e.g. http://127.0.0.1:9000; "" for AWS
	Region         string        // "" = from the AWS config, else us-east-1
	Profile        string        // shared-config profile
	ForcePathStyle bool          // on by default when Endpoint is set (cmd decides)
	MaxConns       int           // HTTP connections kept per host
	StallTimeout   time.Duration // a body that yields no byte for this long is abandoned
	ListStreams    int           // LIST streams at once over the common prefixes; 1 lists in one stream
	// Dial, when set, opens the client's connections in place of its TCP
	// dialer, e.g. an in-memory connection to a fake server in a test.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultS3Options are the settings a mount starts from.
func DefaultS3Options() S3Options {
	return S3Options{MaxConns: 128, StallTimeout: 30 * time.Second, ListStreams: 8}
}

// Validate rejects options that cannot work, naming the field.
func (o S3Options) Validate() error {
	switch {
	case o.MaxConns < 1:
		return fmt.Errorf("S3 connections %d: must be at least 1", o.MaxConns)
	case o.StallTimeout <= 0:
		return fmt.Errorf("stall timeout %s: must be positive", o.StallTimeout)
	case o.ListStreams < 1:
		return fmt.Errorf("list streams %d: must be at least 1", o.ListStreams)
	}
	return nil
}

// S3 reads objects of one bucket under one prefix.
type S3 struct {
	client  *s3.Client
	bucket  string
	prefix  string
	stall   time.Duration
	streams int // LIST streams at once
}

var _ Store = (*S3)(nil)

// NewS3 builds a client. It does not contact the endpoint; the first List
// does, and reports a missing bucket or bad credentials.
func NewS3(ctx context.Context, src Source, opts S3Options) (*S3, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = opts.MaxConns * 2
		t.MaxIdleConnsPerHost = opts.MaxConns
		t.IdleConnTimeout = 90 * time.Second
		t.ResponseHeaderTimeout = opts.StallTimeout
	}).WithDialerOptions(func(d *net.Dialer) {
		d.Timeout = 5 * time.Second
	})
	if opts.Dial != nil {
		httpClient = httpClient.WithTransportOptions(func(t *http.Transport) { t.DialContext = opts.Dial })
	}
	loadOpts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(httpClient),
		// Retries live in the Retry wrapper, which also covers failures
		// in the middle of a body; the SDK makes one attempt.
		config.WithRetryMaxAttempts(1),
		// Failures reach the user through our errors, one line each; the
		// SDK's own log lines would break that.
		config.WithLogger(logging.Nop{}),
	}
	if opts.Profile != "" {
		loadOpts = append(loadOpts, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.ForcePathStyle
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, bucket: src.Bucket, prefix: src.Prefix, stall: opts.StallTimeout, streams: opts.ListStreams}, nil
}

func (s *S3) String() string { return "s3://" + s.bucket + "/" + s.prefix }

// fillETags asks HEAD for the ETag of every listed object that came
// without one (some gateways leave it out of listings). The ETag is the
// version: without one, every version of a key would share its cached
// blocks and If-Match could not tell them apart.
func (s *S3) fillETags(ctx context.Context, objs []Object) error {
	for i := range objs {
		if objs[i].ETag != "" {
			continue
		}
		o, err := s.Stat(ctx, objs[i].Key)
		if err != nil {
			return err
		}
		objs[i] = o
	}
	return nil
}

func (s *S3) Stat(ctx context.Context, key string) (Object, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return Object{}, s.wrap("stat "+key, err)
	}
	if aws.ToString(out.ETag) == "" {
		return Object{}, fmt.Errorf("stat %s (shardfs needs one to tell versions apart): %w", key, ErrNoETag)
	}
	return Object{
		Key:     key,
		Size:    aws.ToInt64(out.ContentLength),
		ETag:    aws.ToString(out.ETag),
		ModTime: aws.ToTime(out.LastModified),
	}, nil
}

func (s *S3) ReadRange(ctx context.Context, obj Object, off int64, p []byte) (int, error) {
	if off < 0 || off > obj.Size {
		return 0, fmt.Errorf("read %s at %d: %w", obj.Key, off, ErrInvalidRange)
	}
	if obj.ETag == "" {
		// If-Match: "" would match nothing on some stores and anything
		// on others.
		return 0, fmt.Errorf("read %s: %w", obj.Key, ErrNoETag)
	}
	want := int64(len(p))
	if rest := obj.Size - off; want > rest {
		want = rest
	}
	if want == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The stall timer is armed before the request: a server that accepts
	// the connection and never answers is as stalled as a silent body.
	watch := newStallWatch(s.stall, cancel)
	defer watch.stop()
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket:  aws.String(s.bucket),
		Key:     aws.String(s.prefix + obj.Key),
		Range:   aws.String(fmt.Sprintf("bytes=%d-%d", off, off+want-1)),
		IfMatch: aws.String(obj.ETag),
	})
	if err != nil {
		switch {
		case errors.Is(context.Cause(ctx), errStalled):
			err = fmt.Errorf("no response in %s: %w", s.stall, errStalled)
		case parent.Err() == nil && isContextError(err):
			// The transport's header timeout (the same length) fired
			// before the stall timer: a stall too, not the caller's
			// deadline, so it is retried.
			err = fmt.Errorf("no response in %s: %w (%v)", s.stall, errStalled, err)
		}
		return 0, s.wrap("read "+obj.Key, err)
	}
	defer out.Body.Close()
	n, err := readFullReporting(watch.reader(out.Body), p[:want], progressOf(ctx))
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
			err = cause
		}
		return n, fmt.Errorf("read %s at %d: body after %d of %d bytes: %w", obj.Key, off, n, want, err)
	}
	if want < int64(len(p)) {
		return n, io.EOF
	}
	return n, nil
}

// wrap maps SDK errors to the package sentinels, keeping the original.
func (s *S3) wrap(op string, err error) error {
	var sentinel error
	var apiErr smithy.APIError
	var respErr *awshttp.ResponseError
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "NoSuchBucket":
		sentinel = ErrNoBucket
	case errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusPreconditionFailed:
		sentinel = ErrChanged
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NoSuchKey" || apiErr.ErrorCode() == "NotFound"):
		sentinel = ErrNotFound
	case errors.As(err, &apiErr) && deniedCodes[apiErr.ErrorCode()],
		errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusForbidden:
		sentinel = ErrDenied
	case strings.Contains(err.Error(), "get credentials"):
		// The SDK reports an empty credential chain only in words.
		sentinel = ErrNoCredentials
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), isDNSError(err):
		sentinel = ErrUnreachable
	}
	if sentinel == nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w (%w)", op, sentinel, err)
}

var deniedCodes = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true,
	"Forbidden": true, "ExpiredToken": true, "InvalidToken": true,
}

func isDNSError(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}
