// Package frame is the header in front of every framed message on a
// stream: its length, 4 bytes big-endian. network.Stream writes and reads
// it (WriteFrame, ReadFrameLimit), and whoever counts a message's bytes on
// the wire counts it (protocol.FramedSize). It imports nothing, so that
// network, which knows no message, can hold its one definition here, with
// the rest of the wire format under protocol/.
package frame

import "encoding/binary"

// Header is the size of the length in front of every frame.
const Header = 4

// Put writes the header of a frame of n bytes into h[:Header].
func Put(h []byte, n int) { binary.BigEndian.PutUint32(h, uint32(n)) }

// Append appends the header of a frame of n bytes to b.
func Append(b []byte, n int) []byte { return binary.BigEndian.AppendUint32(b, uint32(n)) }

// Len is the length a header h (at least Header bytes) announces.
func Len(h []byte) int { return int(binary.BigEndian.Uint32(h)) }

// Size is a frame's bytes on the wire: the header and n bytes of message.
func Size(n int) int { return Header + n }
