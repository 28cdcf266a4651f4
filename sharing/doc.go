// Package sharing implements the XOR secret sharing of 2PCFace and
// (mu,nu)-MPCFace (paper App. G and H): GenShare for mu parties, the
// column-major bitset store every party keeps, the gather of a query's
// selected columns (the paper's sub-vectors z[y] for every row at once), and
// the bit-sliced scoring the entry party runs over the XOR of all parties'
// gathered columns.
//
// The additive sharing of blind mode (docs/BLIND-NOTES.md, docs/SECURITY.md "Blind mode") is in sharing/additive.
//
// # Security model
//
// Every share but the last is drawn uniformly at random, so any mu-1 shares
// of a template are independent of it. A Store holds one party's shares
// only. Gathered columns reveal nothing on their own; their XOR over all mu
// parties, which the entry computes, is the enrolled templates' ternary bits
// at the query's nonzero positions (see docs/SECURITY.md).
package sharing
