package fleet

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"time"
)

// Sample picks n of prefixes for the day: every caller on the same day
// (each drill of one CronJob run, by its index) picks the same n, in the
// same order, and another day other ones.
func Sample(prefixes []string, n int, day time.Time) []string {
	out := slices.Clone(prefixes)
	slices.Sort(out)
	sum := sha256.Sum256([]byte(day.UTC().Format(time.DateOnly)))
	r := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:min(n, len(out))]
}
