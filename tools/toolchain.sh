# Sourced by the scripts that build what etcdkit ships (tools/release.sh,
# tools/image.sh) and by tools/vulncheck.sh, which checks it: the Go
# toolchain of the release binaries and images. The machines start on Go
# 1.26.8, whose standard library has thirteen known vulnerabilities that
# govulncheck finds reachable (fixed in 1.26.9 and 1.26.10, which the
# module proxy here does not serve); go1.27.3 has every fix, and the go
# command fetches it from the module proxy (about 76 MB, seconds, once per
# machine). The tests and the lint run on the machine's Go, as a plain go
# command does: go.mod says go 1.26.0, and the library builds with any Go
# from 1.26 on.
# A GOTOOLCHAIN in the caller's environment (another release, or local
# for the machine's own) wins.
export GOTOOLCHAIN=${GOTOOLCHAIN:-go1.27.3}
