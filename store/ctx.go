package store

import (
	"context"
	"errors"
	"io"
)

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
