package main

import "time"

// clock is the wall clock serve stamps snapshot names and events with,
// schedules full snapshots and measures retention by: nil, the machine's.
// Only the fault soak's build (clock_soak.go) sets it, to step the clock
// of one sidecar as NTP steps a machine's.
var clock func() time.Time
