package gds

import "testing"

// The batch ABI as the README's table and the Python client spell it.
func TestBatchABINumbers(t *testing.T) {
	for name, c := range map[string]struct{ got, want uint32 }{
		"SUBMIT":     {CmdSubmit, 0xC030BD06},
		"WAIT":       {CmdWait, 0xC020BD07},
		"entry size": {uint32(BatchEntrySize), 64},
		"result at":  {uint32(entryResultOff), 48},
		"state at":   {uint32(entryStateOff), 56},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", name, c.got, c.want)
		}
	}
}
