// Package pki issues throwaway certificates for the tests and the
// examples: a CA made for one run and leaf certificates it signs, written
// as PEM files the way an operator's would be, for servers, clients or
// both, valid, expired or for other names.
//
// It owns those certificates only; no product binary imports it.
package pki
