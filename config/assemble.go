package config

import "fmt"

// Assemble builds a configuration from cluster settings (a Literal without
// members) and the members' public descriptors: servers as parties in the
// order given (the first is the HE sequencer), the key server, the
// decider, the clients. It is checked like any configuration. Members in
// settings are dropped: a literal loaded from an earlier configuration may
// serve as settings.
func Assemble(settings Literal, descs []Descriptor) (Literal, error) {
	lit := settings.clone()
	lit.Parties, lit.Clients, lit.KeyServer, lit.Decider = nil, nil, nil, nil
	seen := map[string]bool{}
	for _, d := range descs {
		if err := d.Check(); err != nil {
			return lit, err
		}
		if seen[d.Name] {
			return lit, fmt.Errorf("%s is given twice", d.Name)
		}
		seen[d.Name] = true
		m := d.Member()
		switch d.Role {
		case RoleShareHolder, RoleLocalServer:
			lit.Parties = append(lit.Parties, m)
		case RoleKeyServer:
			if lit.KeyServer != nil {
				return lit, fmt.Errorf("two key servers: %s and %s", lit.KeyServer.Name, d.Name)
			}
			lit.KeyServer = &m
		case RoleDecider:
			if lit.Decider != nil {
				return lit, fmt.Errorf("two deciders: %s and %s", lit.Decider.Name, d.Name)
			}
			lit.Decider = &m
		default:
			lit.Clients = append(lit.Clients, m)
		}
	}
	if _, err := New(lit, ""); err != nil {
		return lit, err
	}
	return lit, nil
}
