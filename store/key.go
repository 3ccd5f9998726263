package store

import (
	"fmt"
	"strings"
	"unicode"
)

// MaxKeyLen is the longest key accepted, the limit the cloud stores share.
const MaxKeyLen = 1024

// CheckKey reports whether key may name an object. The same rules hold on
// every backend so that a backup copied between stores keeps its names: a
// non-empty relative slash path, no empty, "." or ".." element, no backslash
// and no control character, at most MaxKeyLen bytes. The error wraps
// ErrInvalidKey.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if strings.HasSuffix(key, "/") {
		return fmt.Errorf("%w: %q ends with a slash", ErrInvalidKey, key)
	}
	return checkPath(key)
}

// CheckPrefix reports whether prefix may select keys in List: "" selects all,
// otherwise the rules of CheckKey hold, except that it may end with a slash.
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return checkPath(strings.TrimSuffix(prefix, "/"))
}

func checkPath(p string) error {
	if len(p) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(p), MaxKeyLen)
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w: %q is absolute (keys are relative to the store URL)", ErrInvalidKey, p)
	}
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("%w: %q contains a backslash (use / between elements)", ErrInvalidKey, p)
	}
	if strings.IndexFunc(p, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: %q contains a control character", ErrInvalidKey, p)
	}
	for _, elem := range strings.Split(p, "/") {
		switch elem {
		case "":
			return fmt.Errorf("%w: %q has an empty path element", ErrInvalidKey, p)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q element", ErrInvalidKey, p, elem)
		}
	}
	return nil
}

// CleanPrefix turns the path of a store URL into the prefix keys are stored
// under: no leading or trailing slash, checked like a key.
func CleanPrefix(urlPath string) (string, error) {
	p := strings.Trim(urlPath, "/")
	if p == "" {
		return "", nil
	}
	if err := checkPath(p); err != nil {
		return "", fmt.Errorf("prefix of the store URL: %w", err)
	}
	return p, nil
}

// JoinKey returns the full name of key under prefix.
func JoinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "/" + key
}
