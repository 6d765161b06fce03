package files

import (
	"unicode"
	"unicode/utf8"
)

// MaxFilenameBytes bounds a filename.
const MaxFilenameBytes = 255

// CheckFilename returns the filename to keep for name: "file" when name
// is empty, else name itself. A *FilenameError when it holds a / or \ (it
// is a name, not a path), a control character, is not UTF-8, or is over
// MaxFilenameBytes bytes.
func CheckFilename(name string) (string, error) {
	switch {
	case name == "":
		return "file", nil
	case len(name) > MaxFilenameBytes:
		return "", &FilenameError{Filename: name, Reason: "is over 255 bytes"}
	case !utf8.ValidString(name):
		return "", &FilenameError{Filename: name, Reason: "is not valid UTF-8"}
	}
	for _, r := range name {
		switch {
		case r == '/' || r == '\\':
			return "", &FilenameError{Filename: name, Reason: "holds a / or \\: give a name, not a path"}
		case unicode.IsControl(r):
			return "", &FilenameError{Filename: name, Reason: "holds a control character"}
		}
	}
	return name, nil
}
