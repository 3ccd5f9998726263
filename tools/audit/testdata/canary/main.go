// Command canary calls golang.org/x/text/language.Parse at a version with a
// known vulnerability; see go.mod.
package main

import (
	"fmt"
	"os"

	"golang.org/x/text/language"
)

func main() {
	fmt.Println(language.Parse(os.Args[1]))
}
