package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// faultReport is one fault's line in the suite's output:
//
//	FAULT <name>: acquisitions=… lost_elements=… stale_accepted=… stale_rejected=… overlaps=… max_wait=… loss_signal=… next_holder=… [extra]
//
// lost_elements and stale_accepted are the violations; with fencing in
// place both must be 0 under every fault. stale_rejected counts the writes
// the fence stopped, overlaps the times two workers of this process were
// inside at once (the lock alone failed). Durations not measured print "-".
type faultReport struct {
	name                   string
	stats                  lockSetStats
	lost                   []string
	staleAccepted          int
	lossSignal, nextHolder time.Duration
	extra                  string
}

// report gathers the checker's results for the fault called name; the test
// fills in lossSignal, nextHolder and extra before logging it.
func (s *lockSet) report(t *testing.T, name string) *faultReport {
	t.Helper()
	r := &faultReport{name: name, stats: s.snapshot(), lossSignal: -1, nextHolder: -1}
	r.lost, r.staleAccepted = s.verdict(t)
	return r
}

// merge adds the results of another lock-set run of the same fault.
func (r *faultReport) merge(o *faultReport) {
	r.lost = append(r.lost, o.lost...)
	r.staleAccepted += o.staleAccepted
	a, b := &r.stats, o.stats
	a.Acquisitions += b.Acquisitions
	a.StaleRejected += b.StaleRejected
	a.Overlaps += b.Overlaps
	a.LostHolds += b.LostHolds
	a.MaxWait = max(a.MaxWait, b.MaxWait)
	a.LockErrors = append(a.LockErrors, b.LockErrors...)
	a.StoreErrors = append(a.StoreErrors, b.StoreErrors...)
	a.UnlockErrors = append(a.UnlockErrors, b.UnlockErrors...)
}

func (r *faultReport) String() string {
	line := fmt.Sprintf("%s: acquisitions=%d lost_elements=%d stale_accepted=%d stale_rejected=%d overlaps=%d max_wait=%s loss_signal=%s next_holder=%s",
		r.name, r.stats.Acquisitions, len(r.lost), r.staleAccepted, r.stats.StaleRejected, r.stats.Overlaps,
		fmtDuration(r.stats.MaxWait), fmtDuration(r.lossSignal), fmtDuration(r.nextHolder))
	if r.extra != "" {
		line += " " + r.extra
	}
	return line
}

// logFault logs "FAULT <format...>" with the test, and once more at the
// start of a line of its own on stdout, where
// `(cd integration && go test -v .) | grep '^FAULT'` collects the suite's figures
// (t.Log indents its lines).
func logFault(t *testing.T, format string, args ...any) {
	t.Helper()
	line := "FAULT " + fmt.Sprintf(format, args...)
	t.Log(line)
	fmt.Println(line)
}

func fmtDuration(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}

// check logs the report and fails the test on any violation: a lost
// element, a stale write the store accepted, or an error that the fault
// should not cause (Lock failing, a store call failing, Unlock failing other
// than with ErrNotHeld).
func (r *faultReport) check(t *testing.T) {
	t.Helper()
	logFault(t, "%s", r)
	require.Empty(t, r.lost, "acknowledged elements missing from the set: two holders overlapped and the fence let it through")
	require.Zero(t, r.staleAccepted, "the fenced store accepted a write below a token it had seen")
	require.Empty(t, r.stats.LockErrors, "Lock failed")
	require.Empty(t, r.stats.StoreErrors, "store calls failed")
	require.Empty(t, r.stats.UnlockErrors, "Unlock failed other than with ErrNotHeld")
}
