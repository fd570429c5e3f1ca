package authserver

import "slices"

// Which scopes a signed-in user may be granted (authorization_server.scopes:
// a scope listed with groups goes to members of one of them; any other
// scope to everyone), asked by the authorization and consent pages and by
// the ID-JAG grant.

// mayGrant reports whether u may be granted scope (authorization_server.scopes).
func (s *Server) mayGrant(u User, scope string) bool {
	for _, r := range s.o.Scopes {
		if r.Scope == scope {
			for _, g := range r.Groups {
				if slices.Contains(u.Groups, g) {
					return true
				}
			}
			return false
		}
	}
	return true
}

// grantable splits the requested scopes into those u may be granted and
// those withheld.
func (s *Server) grantable(u User, requested []string) (grant, withheld []string) {
	for _, sc := range requested {
		if s.mayGrant(u, sc) {
			grant = append(grant, sc)
		} else {
			withheld = append(withheld, sc)
		}
	}
	return grant, withheld
}
