// Package demo holds what the examples share to run a throwaway member on
// loopback; nothing in it is needed outside a demonstration.
package demo
