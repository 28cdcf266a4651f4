package mpcface

// BlockWords exposes the streamed block size to the package's external
// tests, which build queries by hand.
var BlockWords = blockWords
