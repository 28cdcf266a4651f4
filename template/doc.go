// Package template holds the one almost-isometric ternary transform T_a of
// IDFace (paper section 4.1), the +/- split of its output, the conversion
// between a cosine threshold and an integer score threshold, and the base-p
// Encode/Decode of section 4.2. Every protection mode (2PCFace, MPCFace and
// the HE mode) uses exactly this code, so their scores are comparable.
//
// # Security model
//
// This package computes on plaintext templates. Nothing here logs, prints or
// persists a template; callers must keep that property (see docs/SECURITY.md).
package template
