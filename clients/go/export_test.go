package rlock

// WatchdogCounts exposes to the tests how many renewal pipelines and renewals the watchdog sent.
func WatchdogCounts(l *Locks) (ticks, renewals int) { return l.wd.counts() }
