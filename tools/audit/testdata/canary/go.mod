// The canary of tools/vulncheck.sh: it calls a function with a known
// vulnerability (GO-2021-0113, golang.org/x/text/language.Parse before
// v0.3.7), so a scan that does not report it did not read the database.
module canary

go 1.26.0

require golang.org/x/text v0.3.5
