package openapitools

// Problem is something of a document that is not served as written: an
// operation left out (a required cookie parameter, a body of a media type
// no tool can send), a part of one left out or changed (an optional cookie
// parameter, a renamed argument, a recursive schema cut), or a selection
// that names what the document does not have. Problems are for the
// operator: the configuration check prints them.
type Problem struct {
	// Operation is the operation concerned, as "GET /pets/{petId}", or ""
	// for a problem of the selection.
	Operation string
	// Message says what was left out or changed, and why.
	Message string
}

// String returns the problem as one line.
func (p Problem) String() string {
	if p.Operation == "" {
		return p.Message
	}
	return p.Operation + ": " + p.Message
}
