// Command bench measures etcdkit against a reference measured in the same
// run and prints a markdown table of ratios.
//
//	go run ./bench                      # every benchmark
//	go run ./bench -only store -size 64 # one benchmark, smaller objects
//	go run ./bench -short               # CI: small sizes, fails below the bounds
//
// Each benchmark runs its subject and its reference alternately, -runs
// times, and reports medians; the table's ratio is etcdkit's throughput
// over the reference's (above 1 is faster than the reference).
//
// It owns the measurements and their references, not the code measured.
package main
