package journal

import (
	"encoding/binary"
	"math/bits"
)

// The two hash functions of the journal file format. A file with the
// KEYED_HASH incompatible flag hashes DATA and FIELD payloads with siphash24
// keyed by its file_id; older files use Bob Jenkins' lookup3 hashlittle2,
// combined into 64 bits as systemd's jenkins_hash64 does (the first value it
// returns, c, is the high half, the second, b, the low half).

// siphash24 is SipHash-2-4 of data with a 16-byte key (k0 and k1 are the two
// little-endian halves of the key), as in systemd's siphash24.c.
func siphash24(key [16]byte, data []byte) uint64 {
	k0 := binary.LittleEndian.Uint64(key[0:8])
	k1 := binary.LittleEndian.Uint64(key[8:16])
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573

	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}

	n := len(data)
	for len(data) >= 8 {
		m := binary.LittleEndian.Uint64(data)
		v3 ^= m
		round()
		round()
		v0 ^= m
		data = data[8:]
	}
	// The last block: the remaining bytes, little-endian, with the length's
	// low byte on top.
	last := uint64(n) << 56
	for i := len(data) - 1; i >= 0; i-- {
		last |= uint64(data[i]) << (8 * uint(i))
	}
	v3 ^= last
	round()
	round()
	v0 ^= last

	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// jenkinsHash64 is systemd's jenkins_hash64: lookup3's hashlittle2 with both
// seeds 0, the primary value c in the high 32 bits and b in the low 32 bits.
func jenkinsHash64(data []byte) uint64 {
	c, b := hashlittle2(data, 0, 0)
	return uint64(c)<<32 | uint64(b)
}

// hashlittle2 is lookup3's hashlittle2 over a byte slice, reading the key as
// little-endian 32-bit words (what the C code computes on a little-endian
// machine, whatever the key's alignment).
func hashlittle2(k []byte, pc, pb uint32) (uint32, uint32) {
	a := 0xdeadbeef + uint32(len(k)) + pc
	b := a
	c := a + pb

	for len(k) > 12 {
		a += binary.LittleEndian.Uint32(k[0:4])
		b += binary.LittleEndian.Uint32(k[4:8])
		c += binary.LittleEndian.Uint32(k[8:12])
		// mix(a, b, c)
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		k = k[12:]
	}
	if len(k) == 0 {
		// Zero remaining bytes need no final mixing.
		return c, b
	}
	var tail [12]byte
	copy(tail[:], k)
	a += binary.LittleEndian.Uint32(tail[0:4])
	b += binary.LittleEndian.Uint32(tail[4:8])
	c += binary.LittleEndian.Uint32(tail[8:12])
	// final(a, b, c)
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c, b
}
