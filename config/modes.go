package config

import "github.com/idface/idface/sharing/replicated"

// The modes of this build, in the order the CLI lists them: what each is,
// as data (ModeSpec). Adding a mode is its row here, its engine in package
// modes, its device part in package device where its client makes shares,
// and its row in the README's table of modes (docs/ARCHITECTURE.md
// "Adding a mode"). Programs ask a mode's declaration what the mode does;
// outside the mode packages none compares a mode's name
// (modes.TestNoModeNameCompared).
const (
	Mode2PC        Mode = "2pc"        // 2PCFace: two parties with XOR shares (paper App. G); modes/mpcface
	ModeMPC        Mode = "mpc"        // (mu,nu)-MPCFace: mu parties with XOR shares (App. H); modes/mpcface
	ModeHE         Mode = "he"         // IDFace: encrypted database and a key server (4.3, App. H); modes/hemode
	ModeBlind      Mode = "blind"      // additive shares and a decider; the entry learns only the answer; modes/blind
	ModeReplicated Mode = "replicated" // 2-of-3 replicated shares and a decider; any one deviating server is caught; modes/replicated
)

var modeList = []ModeSpec{
	{
		Name: Mode2PC, Summary: "2PCFace: two servers with XOR shares",
		Layout: Layout{PartyRole: RoleShareHolder, PartyNoun: "parties", MinParties: 2, MaxParties: 2, DefaultParties: 2, Hint: " (use mode mpc)", Origins: true},
		Shards: true, Trust: mpcTrust,
	},
	{
		Name: ModeMPC, Summary: "(mu,nu)-MPCFace: two or more servers with XOR shares (--parties)",
		Layout: Layout{PartyRole: RoleShareHolder, PartyNoun: "parties", MinParties: 2, MaxParties: MaxParties, DefaultParties: 2, Origins: true},
		Shards: true, Trust: mpcTrust,
	},
	{
		Name: ModeHE, Summary: "IDFace: encrypted database and a key server (--scheme paillier)",
		Layout: Layout{PartyRole: RoleLocalServer, PartyNoun: "local servers",
			MinParties: 1, MaxParties: MaxParties, DefaultParties: 1, Helper: RoleKeyServer},
		// heidface's schemes: BGV with LogN = 12 and a 59-bit plaintext
		// modulus, Paillier with one 2047-bit value a ciphertext
		// (hemode.TestSchemesAreHeidface). Every group a batch touches
		// costs 2d fresh encryptions at every local server within one
		// request's timeout (Paillier: about 0.6 s a group on two cores,
		// 341 rows; BGV's groups hold tens of thousands of rows): at most
		// four groups.
		Schemes:      []Scheme{{Name: "bgv", Slots: 4096, SlotBits: 59}, {Name: "paillier", Slots: 1, SlotBits: 2047}},
		EnrollGroups: 4,
		// Each local server and the key server may run as a coordinator
		// and S shards (shard.go).
		Shards:         true,
		NoRevealScores: "in mode he the key server never reveals scores",
		// The entry sums every group and asks the key server.
		IdentifyTimeouts: 4,
		Trust:            "trust: the key server and the local servers must not collude (the key decrypts the database); a deviating server can change answers, and a deviating local server can probe the key server's decryptions (docs/SECURITY.md)",
	},
	{
		Name:    ModeBlind,
		Summary: "blind mode: the entry learns only the answer, a decider the permuted scores",
		Layout: Layout{PartyRole: RoleShareHolder, PartyNoun: "share holders",
			MinParties: 2, MaxParties: MaxParties, DefaultParties: 2, Helper: RoleDecider, Origins: true},
		Levels: true, Sealed: true, Shards: true,
		// A holder logs its share of each row.
		LogShares: 1,
		Trust:     "trust: semi-honest: one deviating share holder can change answers (make a chosen id accepted) and, as the entry, learn the exact scores of rows it chooses; the decider must not collude with a holder (docs/SECURITY.md)",
	},
	{
		Name:    ModeReplicated,
		Summary: "replicated blind mode: three holders with 2-of-3 shares and a decider; any one deviating server is caught",
		Layout: Layout{PartyRole: RoleShareHolder, PartyNoun: "share holders",
			MinParties: replicated.Holders, MaxParties: replicated.Holders, DefaultParties: replicated.Holders, Helper: RoleDecider, Origins: true},
		Levels: true, Sealed: true, HideProbes: true,
		// A holder logs its pair of shares of each row and their trailer:
		// at k = 16 and d = 512 a full protocol.MaxBatch would not fit one
		// log record.
		LogShares: 2, LogExtra: replicated.TrailerSize,
		Outage: true, Reshare: true, Shards: true,
		Trust: "trust: one of the four servers may deviate: a holder or entry that alters its part gets the query refused, a decider cannot get a row below the threshold accepted; the entry learns the answered rows' scores; no two servers may collude (docs/REPLICATED-NOTES.md)",
	},
}

const mpcTrust = "trust: semi-honest: one deviating share holder can change answers undetected; an entry sees every row's ternary values at its probes' positions (docs/SECURITY.md)"
