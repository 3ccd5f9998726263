// Package examples holds runnable programs, one per division of
// responsibilities and a quickstart, and the test that builds and runs
// each (README.md says which to choose).
package examples
