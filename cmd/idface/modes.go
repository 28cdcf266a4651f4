package main

import (
	"fmt"
	"strings"

	"github.com/idface/idface/config"
)

// modeNames joins the registered modes' names with sep ("2pc|mpc|he|blind"):
// help texts name the modes this build offers, never a fixed list.
func modeNames(sep string) string {
	var out []string
	for _, m := range config.Modes() {
		out = append(out, string(m))
	}
	return strings.Join(out, sep)
}

// serverRoles says which modes each server role belongs to:
// "share-holder (2pc, mpc, blind), local-server (he), key-server (he),
// decider (blind)".
func serverRoles() string {
	byRole := map[string][]string{}
	var order []string
	add := func(role string, m config.Mode) {
		if _, ok := byRole[role]; !ok {
			order = append(order, role)
		}
		byRole[role] = append(byRole[role], string(m))
	}
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		add(s.PartyRole, m)
		if s.Helper != "" {
			add(s.Helper, m)
		}
	}
	var out []string
	for _, r := range order {
		out = append(out, fmt.Sprintf("%s (%s)", r, strings.Join(byRole[r], ", ")))
	}
	return strings.Join(out, ", ")
}

// modeList is one line per mode: its name and what it is.
func modeList() string {
	var b strings.Builder
	for _, m := range config.Modes() {
		s, _ := config.Spec(m)
		fmt.Fprintf(&b, "  %-6s %s\n", m, s.Summary)
	}
	return b.String()
}
