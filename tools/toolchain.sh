# Sourced by the project's scripts: the Go toolchain they build, test and
# release with. The machines start on Go 1.26.8, which govulncheck finds
# thirteen reachable standard-library vulnerabilities in (fixed in 1.26.9
# and 1.26.10); go1.27.3 has every fix, and the go command fetches it from
# the module proxy (about 76 MB, seconds, once per machine). go.mod still
# says go 1.26.0: the library builds with any Go from 1.26 on.
# A GOTOOLCHAIN in the caller's environment (another release, or local
# for the machine's own) wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
