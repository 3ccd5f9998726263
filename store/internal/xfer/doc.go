// Package xfer holds what the store backends share to move bytes: a reader
// that stops with its context, and a reader that downloads an object in
// parallel ranges with bounded memory and delivers the bytes in order.
//
// It owns no knowledge of any SDK; backends give it a function that opens a
// byte range.
package xfer
