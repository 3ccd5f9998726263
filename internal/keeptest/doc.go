// Package keeptest checks, for each store backend's tests, what retention
// keeps on that backend: a pinned chain through the policies, deletes by
// hand and their refusals, and a second site's own retention with the
// first site's pins; and on a bucket that locks what it holds, that a
// lock keeps a chain whole through GC, deletes and pins. It owns no
// retention logic (snapshot does) and no bucket set-up (each backend's
// tests do).
package keeptest
