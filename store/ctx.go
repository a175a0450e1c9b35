package store

import (
	"context"
	"errors"
	"io"
)

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// isEOF reports the end-of-object signal of ReadRange: a bare io.EOF. A
// wrapped EOF is a transport failure (a connection closed before the
// response, `Get "...": EOF`) and must be retried, not taken as the end.
func isEOF(err error) bool { return err == io.EOF }
