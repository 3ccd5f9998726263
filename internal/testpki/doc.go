// Package testpki issues certificates for tests: a CA made for the test
// run and leaf certificates it signs, written as PEM files the way an
// operator's would be, for servers, clients or both, valid, expired or
// for other names.
//
// It owns test certificates only; nothing outside tests imports it.
package testpki
